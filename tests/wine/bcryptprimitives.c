/* A stand-in for Windows' bcryptprimitives.dll, for running the Windows sidecar under Wine 8.0
 * (Debian 12 and 13), which lacks it. Rust's std (1.78 and later) takes its random bytes from
 * ProcessPrng in that DLL; this one exports ProcessPrng and fills the buffer with advapi32's
 * RtlGenRandom (exported as SystemFunction036). Real Windows has the real DLL: this file is
 * only built by the tests (tests/harness/wine.rs) and shipped nowhere. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
