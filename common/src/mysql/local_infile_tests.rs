//! Unit tests of the reader of the files `LOAD … LOCAL INFILE` statements name.

use super::*;
use proptest::prelude::*;

fn names(text: &str) -> Vec<Vec<u8>> {
    named_files(text.as_bytes())
}

#[test]
fn load_data_and_xml_statements_name_their_file() {
    for text in [
        "LOAD DATA LOCAL INFILE '/tmp/a.csv' INTO TABLE t",
        "load data local infile \"/tmp/a.csv\" into table t",
        "  \n\tLoAd DaTa LOW_PRIORITY LOCAL INFILE '/tmp/a.csv' INTO TABLE t",
        "LOAD DATA CONCURRENT LOCAL INFILE '/tmp/a.csv' INTO TABLE t",
        "LOAD XML LOCAL INFILE '/tmp/a.csv' INTO TABLE t ROWS IDENTIFIED BY '<r>'",
        "/* c */ -- line\n# hash\nLOAD/**/DATA\n-- \nLOCAL #x\n INFILE'/tmp/a.csv'",
        "/*!50100 LOAD DATA LOCAL INFILE '/tmp/a.csv' INTO TABLE t */",
        "/*M!100100 LOAD DATA */ LOCAL INFILE '/tmp/a.csv'",
    ] {
        assert_eq!(names(text), [b"/tmp/a.csv".to_vec()], "{text}");
        assert!(is_local_infile(text.as_bytes()), "{text}");
        assert!(requested_file_allowed(text.as_bytes(), b"/tmp/a.csv"), "{text}");
        assert!(!requested_file_allowed(text.as_bytes(), b"/etc/passwd"), "{text}");
    }
}

#[test]
fn other_statements_name_no_file() {
    for text in [
        "SELECT 1",
        "",
        "LOAD DATA INFILE '/tmp/a.csv' INTO TABLE t",
        "LOAD DATA LOW_PRIORITY CONCURRENT LOCAL INFILE '/tmp/a.csv' INTO TABLE t",
        "SELECT 'LOAD DATA LOCAL INFILE ''/tmp/a.csv'''",
        "SELECT 1 /* ; LOAD DATA LOCAL INFILE '/tmp/a.csv' */",
        "SELECT 1 -- ; LOAD DATA LOCAL INFILE '/tmp/a.csv'",
        "SELECT 1 # ; LOAD DATA LOCAL INFILE '/tmp/a.csv'",
        "SELECT `;LOAD DATA LOCAL INFILE '/tmp/a.csv'`",
        "EXPLAIN LOAD DATA LOCAL INFILE '/tmp/a.csv' INTO TABLE t",
        "LOAD DATA LOCAL INFILE `/tmp/a.csv` INTO TABLE t",
        "LOAD DATA LOCAL INFILE '/tmp/a.csv",
        "LOADDATA LOCAL INFILE '/tmp/a.csv'",
    ] {
        assert!(names(text).is_empty(), "{text}");
        assert!(!is_local_infile(text.as_bytes()), "{text}");
        assert!(!requested_file_allowed(text.as_bytes(), b"/tmp/a.csv"), "{text}");
    }
}

#[test]
fn a_later_statement_of_a_multi_statement_query_counts() {
    let text = "SELECT 1; LOAD DATA LOCAL INFILE 'a' INTO TABLE t;\n/**/load xml local infile 'b'";
    assert_eq!(names(text), [b"a".to_vec(), b"b".to_vec()]);
    assert!(requested_file_allowed(text.as_bytes(), b"b"));
    assert_eq!(names("SELECT ';'; LOAD DATA LOCAL INFILE 'c'"), [b"c".to_vec()]);
    // `--` not followed by a blank is two minus signs, not a comment.
    assert_eq!(names("SELECT 1--1;LOAD DATA LOCAL INFILE 'd'"), [b"d".to_vec()]);
}

#[test]
fn escapes_give_both_readings() {
    let text = r"LOAD DATA LOCAL INFILE 'C:\temp\new\x.csv' INTO TABLE t";
    assert_eq!(names(text), [b"C:\temp\newx.csv".to_vec(), br"C:\temp\new\x.csv".to_vec()]);
    let text = r#"LOAD DATA LOCAL INFILE '\0\'\"\b\n\r\t\Z\\\%\_\q''x' INTO TABLE t"#;
    let escaped = b"\0'\"\x08\n\r\t\x1a\\\\%\\_q'x".to_vec();
    assert_eq!(names(text)[0], escaped);
    // Without backslash escapes the literal ends at the quote after `\0\`.
    assert_eq!(names(text).get(1), Some(&br"\0\".to_vec()));
    assert_eq!(names(r#"LOAD DATA LOCAL INFILE "a""b'c" INTO TABLE t"#), [b"a\"b'c".to_vec()]);
}

#[test]
fn where_statements_split_depends_on_the_reading() {
    // Escaped: one literal. Plain: the literal ends at `\'`, then a LOAD statement.
    let text = r"SELECT 'x\'; LOAD DATA LOCAL INFILE 'f' INTO TABLE t; -- '";
    assert_eq!(names(text), [b"f".to_vec()]);
    assert!(files_named_in(text.as_bytes(), Backslashes::Escape).next().is_none());
}

proptest! {
    #[test]
    fn never_panics_on_any_bytes(
        text in proptest::collection::vec(any::<u8>(), 0..200),
        requested in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let _ = requested_file_allowed(&text, &requested);
        let _ = is_local_infile(&text);
    }

    #[test]
    fn never_panics_on_near_statements(parts in proptest::collection::vec(
        prop::sample::select(vec!["LOAD", " ", "DATA", "LOCAL", "INFILE", "'", "\"", "\\",
            "/*", "*/", "/*!", "--", "#", "\n", ";", "`", "a", "LOW_PRIORITY", "XML"]), 0..40)) {
        let _ = named_files(parts.concat().as_bytes());
    }

    #[test]
    fn a_text_without_infile_names_no_file_in_either_reading(parts in proptest::collection::vec(
        prop::sample::select(vec!["LOAD", " ", "DATA", "LOCAL", "INFILE", "InFiLe", "IN", "FILE",
            "inf", "ile", "'x'", "\"x\"", "\\", "/*", "*/", "/*!", "--", "\n", ";", "XML"]), 0..30)) {
        let text = parts.concat();
        let lexed = [Backslashes::Escape, Backslashes::Plain]
            .map(|mode| files_named_in(text.as_bytes(), mode).count());
        if !holds_infile(text.as_bytes()) {
            prop_assert_eq!(lexed, [0, 0], "{:?}", text);
        }
        prop_assert_eq!(lexed != [0, 0], is_local_infile(text.as_bytes()), "{:?}", text);
    }
}
