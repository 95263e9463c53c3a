//! Unit tests of the compact answer head: round trips, and garbage refused without panics.

use super::*;
use crate::seeded::Draw;

#[test]
fn an_answer_reads_back_as_written() {
    let mut writer = HeadWriter::answer(201, true, 0);
    writer.header("x-tunnel-session", b"abcd").expect("header");
    writer.header("x-custom", b"v").expect("spelled name");
    let mut message = writer.finish().expect("finish");
    message.extend_from_slice(b"frames");
    let read = read_answer(&message).expect("an answer");
    assert_eq!((read.status, read.more), (201, true));
    assert_eq!(read.headers[0].0, NameAt::Known(2));
    let NameAt::Spelled(name) = read.headers[1].0.clone() else { panic!("spelled") };
    assert_eq!(&message[name], b"x-custom");
    assert_eq!(&message[read.headers[1].1.clone()], b"v");
    assert_eq!(&message[read.body], b"frames");
}

#[test]
fn garbage_is_refused_whatever_its_bytes() {
    // Every truncation of a good message, and seeded random bytes, fail cleanly.
    let mut writer = HeadWriter::answer(200, false, 0);
    writer.header("content-type", b"application/json").expect("header");
    let good = writer.finish().expect("finish");
    for cut in 0..good.len() {
        assert!(read_answer(&good[..cut]).is_err(), "cut at {cut}");
    }
    let mut draw = Draw::seeded("garbage messages");
    let mut next = || draw.bits();
    for _ in 0..20_000 {
        let len = (next() % 64) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len >= 2 && next() % 2 == 0 {
            // A plausible head length, to reach the fields.
            data[0] = 0;
            data[1] = (len - 2) as u8;
        }
        let _ = read_answer(&data);
    }
    assert!(read_answer(&[0, 3, 4, 0, 200]).is_err(), "unknown flags");
    assert!(read_answer(&[0, 4, 0, 0, 5, 0]).is_err(), "a status out of range");
    assert!(read_answer(&[0, 5, 0, 0, 200, 0, 99]).is_err(), "bytes left in the head");
}

#[test]
fn limits_are_errors_not_truncations() {
    let mut writer = HeadWriter::answer(200, false, 0);
    for _ in 0..255 {
        writer.header("x-a", b"").expect("header");
    }
    assert!(writer.header("x-a", b"").is_err(), "a 256th header");
    let mut writer = HeadWriter::answer(200, false, 0);
    assert!(writer.header("x-a", &vec![b'v'; 70_000]).is_err(), "a value over 64 KiB");
    assert!(writer.header(&"n".repeat(300), b"").is_err(), "a name over 255 bytes");
}

#[test]
fn every_known_name_has_its_code_in_any_case_and_no_other_name_has_one() {
    for (code, name) in HEADER_NAMES.iter().enumerate() {
        assert_eq!(header_code(name), Some(code), "{name}");
        assert_eq!(header_code(&name.to_ascii_uppercase()), Some(code), "{name}");
        // A name one letter off, or one longer or shorter, is spelled out.
        let mut off = name.to_string();
        off.replace_range(name.len() - 1.., "#");
        assert_eq!(header_code(&off), None, "{off}");
        assert_eq!(header_code(&format!("{name}s")), None, "{name}s");
        assert_eq!(header_code(&name[1..]), None, "{}", &name[1..]);
    }
    assert_eq!(header_code(""), None);
    assert_eq!(header_code(&"x".repeat(300)), None);
}
