//! The binary protocol of prepared statements: parameters of COM_STMT_EXECUTE decoded into
//! values, result rows encoded back from the values `mysql_async` decoded, each by its column
//! type, as a server would send them.

use bytes::{BufMut, BytesMut};
use common::mysql::put_lenenc_int;
use mysql_async::consts::{ColumnFlags, ColumnType};
use mysql_async::{Row, Value};
use mysql_common::io::ParseBuf;
use mysql_common::packets::Column;
use mysql_common::proto::MyDeserialize;
use mysql_common::value::{BinValue, ValueDeserializer};

/// A parameter type as COM_STMT_EXECUTE declares it.
pub type ParamType = (ColumnType, ColumnFlags);

/// The parts of a COM_STMT_EXECUTE payload (after the command byte).
#[derive(Debug)]
pub struct ExecuteRequest {
    /// Statement id.
    pub statement_id: u32,
    /// Parameter types, when the client sent them (new-params-bound).
    pub types: Option<Vec<ParamType>>,
    /// Parameter values.
    pub values: Vec<Value>,
}

/// Decodes the statement id of an execute payload (to look up its parameter count).
pub fn statement_id(args: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(args.get(..4)?.try_into().ok()?))
}

/// Decodes a COM_STMT_EXECUTE payload for a statement with `params` parameters, using
/// `bound` when the client did not send the types again. Parameters sent earlier with
/// COM_STMT_SEND_LONG_DATA (`long_data`) are absent from the packet and taken from there.
pub fn parse_execute(
    args: &[u8],
    params: usize,
    bound: Option<&[ParamType]>,
    long_data: &[(u16, bytes::Bytes)],
) -> Result<ExecuteRequest, &'static str> {
    let statement_id = statement_id(args).ok_or("execute packet too short")?;
    let mut rest = args.get(9..).ok_or("execute packet too short")?;
    if params == 0 {
        return Ok(ExecuteRequest { statement_id, types: None, values: Vec::new() });
    }
    let bitmap_len = params.div_ceil(8);
    let nulls = rest.get(..bitmap_len).ok_or("null bitmap missing")?.to_vec();
    rest = &rest[bitmap_len..];
    let (&new_bound, after) = rest.split_first().ok_or("new-params-bound flag missing")?;
    rest = after;
    let types = if new_bound == 1 {
        let raw = rest.get(..params * 2).ok_or("parameter types missing")?;
        rest = &rest[params * 2..];
        let mut types = Vec::with_capacity(params);
        for pair in raw.chunks(2) {
            let column_type =
                ColumnType::try_from(pair[0]).map_err(|_| "unknown parameter type")?;
            let flags =
                if pair[1] & 0x80 != 0 { ColumnFlags::UNSIGNED_FLAG } else { ColumnFlags::empty() };
            types.push((column_type, flags));
        }
        Some(types)
    } else {
        None
    };
    let in_use = types.as_deref().or(bound).ok_or("parameter types were never sent")?;
    let mut buf = ParseBuf(rest);
    let mut values = Vec::with_capacity(params);
    for (i, ty) in in_use.iter().enumerate() {
        if nulls[i / 8] & (1 << (i % 8)) != 0 || ty.0 == ColumnType::MYSQL_TYPE_NULL {
            values.push(Value::NULL);
            continue;
        }
        if let Some((_, data)) = long_data.iter().find(|(p, _)| usize::from(*p) == i) {
            values.push(Value::Bytes(data.to_vec()));
            continue;
        }
        let value = ValueDeserializer::<BinValue>::deserialize(*ty, &mut buf)
            .map_err(|_| "malformed parameter value")?;
        values.push(value.0);
    }
    Ok(ExecuteRequest { statement_id, types, values })
}

/// Appends one binary result row (`0x00`, NULL bitmap at offset 2, values by column type).
pub fn encode_row(buf: &mut BytesMut, row: Row, columns: &[Column]) {
    let item = common::wire::list_item_begin(buf);
    let values = row.unwrap_raw();
    buf.put_u8(0);
    let bitmap_at = buf.len();
    buf.put_bytes(0, (values.len() + 7 + 2) / 8);
    for (i, (value, column)) in values.into_iter().zip(columns).enumerate() {
        match value {
            None | Some(Value::NULL) => buf[bitmap_at + (i + 2) / 8] |= 1 << ((i + 2) % 8),
            Some(value) => put_value(buf, value, column.column_type()),
        }
    }
    common::wire::list_item_finish(buf, item);
}

fn put_value(buf: &mut BytesMut, value: Value, ty: ColumnType) {
    use ColumnType::*;
    match value {
        Value::Int(i) => put_int(buf, i as u64, ty),
        Value::UInt(u) => put_int(buf, u, ty),
        Value::Float(f) if ty == MYSQL_TYPE_FLOAT => buf.put_f32_le(f),
        Value::Float(f) => buf.put_f64_le(f64::from(f)),
        Value::Double(d) if ty == MYSQL_TYPE_FLOAT => buf.put_f32_le(d as f32),
        Value::Double(d) => buf.put_f64_le(d),
        Value::Date(y, mo, d, h, mi, s, us) => {
            let len: u8 = if us != 0 {
                11
            } else if h != 0 || mi != 0 || s != 0 {
                7
            } else if y != 0 || mo != 0 || d != 0 {
                4
            } else {
                0
            };
            buf.put_u8(len);
            if len >= 4 {
                buf.put_u16_le(y);
                buf.put_u8(mo);
                buf.put_u8(d);
            }
            if len >= 7 {
                buf.put_u8(h);
                buf.put_u8(mi);
                buf.put_u8(s);
            }
            if len == 11 {
                buf.put_u32_le(us);
            }
        }
        Value::Time(neg, days, h, m, s, us) => {
            let len: u8 = if us != 0 {
                12
            } else if days != 0 || h != 0 || m != 0 || s != 0 {
                8
            } else {
                0
            };
            buf.put_u8(len);
            if len >= 8 {
                buf.put_u8(u8::from(neg));
                buf.put_u32_le(days);
                buf.put_u8(h);
                buf.put_u8(m);
                buf.put_u8(s);
            }
            if len == 12 {
                buf.put_u32_le(us);
            }
        }
        Value::Bytes(bytes) => {
            put_lenenc_int(buf, bytes.len() as u64);
            buf.put_slice(&bytes);
        }
        Value::NULL => {}
    }
}

fn put_int(buf: &mut BytesMut, n: u64, ty: ColumnType) {
    use ColumnType::*;
    match ty {
        MYSQL_TYPE_TINY => buf.put_u8(n as u8),
        MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR => buf.put_u16_le(n as u16),
        MYSQL_TYPE_LONG | MYSQL_TYPE_INT24 => buf.put_u32_le(n as u32),
        _ => buf.put_u64_le(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_execute_parameters() {
        // stmt 7, flags 0, iterations 1, 3 params: NULL, LONGLONG 5 unsigned, VAR_STRING "hi".
        let mut p = vec![7, 0, 0, 0, 0, 1, 0, 0, 0];
        p.push(0b001);
        p.push(1);
        p.extend_from_slice(&[0x06, 0, 0x08, 0x80, 0xfd, 0]);
        p.extend_from_slice(&u64::MAX.to_le_bytes());
        p.extend_from_slice(&[2, b'h', b'i']);
        let req = parse_execute(&p, 3, None, &[]).expect("parses");
        assert_eq!(req.statement_id, 7);
        assert_eq!(
            req.values,
            vec![Value::NULL, Value::UInt(u64::MAX), Value::Bytes(b"hi".to_vec())]
        );
        let types = req.types.expect("types");
        // Re-execution without types uses the bound ones.
        let mut again = vec![7, 0, 0, 0, 0, 1, 0, 0, 0, 0b001, 0];
        again.extend_from_slice(&9u64.to_le_bytes());
        again.extend_from_slice(&[1, b'x']);
        let req = parse_execute(&again, 3, Some(&types), &[]).expect("parses");
        assert_eq!(req.values[1], Value::Int(9), "small unsigned values decode as Int");
        assert!(parse_execute(&again, 3, None, &[]).is_err(), "no types known");
        assert!(parse_execute(&[1, 2], 1, None, &[]).is_err());
    }
}
