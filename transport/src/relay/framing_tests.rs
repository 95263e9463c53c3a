//! Framing tests on answers captured from MariaDB 10.11 (a text result, a prepare, a cursor
//! execute and its fetches), plus the auth, LOCAL INFILE and progress cases built from the
//! protocol documentation; every answer is also scanned split at every byte.

use proptest::prelude::*;

use super::*;

/// `SELECT 'after the cursor'`, text protocol, without CLIENT_DEPRECATE_EOF.
const TEXT_RESULT: &[u8] = &[
    1, 0, 0, 1, 1, 38, 0, 0, 2, 3, 100, 101, 102, 0, 0, 0, 16, 97, 102, 116, 101, 114, 32, 116,
    104, 101, 32, 99, 117, 114, 115, 111, 114, 0, 12, 45, 0, 64, 0, 0, 0, 253, 1, 0, 39, 0, 0, 5,
    0, 0, 3, 254, 0, 0, 2, 0, 17, 0, 0, 4, 16, 97, 102, 116, 101, 114, 32, 116, 104, 101, 32, 99,
    117, 114, 115, 111, 114, 5, 0, 0, 5, 254, 0, 0, 2, 0,
];

/// The column definition of `seq` in `seq_1_to_5`.
const SEQ_COLUMN: &[u8] = &[
    59, 0, 0, 2, 3, 100, 101, 102, 11, 116, 117, 110, 110, 101, 108, 95, 116, 101, 115, 116, 10,
    115, 101, 113, 95, 49, 95, 116, 111, 95, 53, 10, 115, 101, 113, 95, 49, 95, 116, 111, 95, 53,
    3, 115, 101, 113, 3, 115, 101, 113, 12, 63, 0, 20, 0, 0, 0, 8, 35, 80, 0, 0, 0,
];

/// COM_STMT_PREPARE `SELECT seq FROM seq_1_to_5`: statement 2, one column, no parameter.
fn prepare_answer() -> Vec<u8> {
    let mut a = vec![12, 0, 0, 1, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    a.extend_from_slice(SEQ_COLUMN);
    a.extend_from_slice(&[5, 0, 0, 3, 254, 0, 0, 2, 0]);
    a
}

/// COM_STMT_EXECUTE with CURSOR_TYPE_READ_ONLY: metadata, then an EOF with CURSOR_EXISTS.
fn cursor_execute_answer() -> Vec<u8> {
    let mut a = vec![1, 0, 0, 1, 1];
    a.extend_from_slice(SEQ_COLUMN);
    a.extend_from_slice(&[5, 0, 0, 3, 254, 0, 0, 98, 0]);
    a
}

/// COM_STMT_FETCH of 3 rows, then of the last 2 (LAST_ROW_SENT).
fn fetch_answers() -> [Vec<u8>; 2] {
    let row = |seq: u8, n: u8| [10, 0, 0, seq, 0, 0, n, 0, 0, 0, 0, 0, 0, 0];
    let mut first = [row(1, 1), row(2, 2), row(3, 3)].concat();
    first.extend_from_slice(&[5, 0, 0, 4, 254, 0, 0, 66, 0]);
    let mut last = [row(1, 4), row(2, 5)].concat();
    last.extend_from_slice(&[5, 0, 0, 3, 254, 0, 0, 130, 0]);
    [first, last]
}

/// A packet with sequence id `seq`.
fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    PacketHead::write(&mut p, payload.len(), seq);
    p.extend_from_slice(payload);
    p
}

/// Scans `answer` fed in the given pieces, as a reader buffer would (unused bytes stay);
/// returns the bytes used and how the turn ended.
fn scan_in_pieces(
    framing: &mut Framing,
    answer: &[u8],
    cuts: &[usize],
) -> (usize, Option<TurnEnd>) {
    let mut buffer = Vec::new();
    let (mut used, mut fed) = (0, 0);
    for &cut in cuts.iter().chain(std::iter::once(&answer.len())) {
        buffer.extend_from_slice(&answer[fed..cut.max(fed)]);
        fed = cut.max(fed);
        let scan = framing.scan(&buffer).unwrap_or_else(|e| panic!("{e}"));
        used += scan.used;
        buffer.drain(..scan.used);
        if scan.end.is_some() {
            return (used, scan.end);
        }
    }
    (used, None)
}

/// Checks that `answer` is framed whole, with `end`, however it is split.
fn frames_whole(expect: Expect, shape: Shape, answer: &[u8], end: TurnEnd) {
    let mut whole = Framing::new(expect, shape);
    assert_eq!(scan_in_pieces(&mut whole, answer, &[]), (answer.len(), Some(end)));
    for cut in 0..answer.len() {
        let mut framing = Framing::new(expect, shape);
        let got = scan_in_pieces(&mut framing, answer, &[cut]);
        assert_eq!(got, (answer.len(), Some(end)), "split at {cut}");
    }
}

const EOF_SHAPE: Shape = Shape { deprecate_eof: false, progress: false };

#[test]
fn a_text_result_ends_at_its_final_eof() {
    frames_whole(Expect::Result, EOF_SHAPE, TEXT_RESULT, TurnEnd::Done);
    // Nothing of the answer is used before it is whole enough to decide.
    let mut framing = Framing::new(Expect::Result, EOF_SHAPE);
    assert_eq!(framing.scan(&TEXT_RESULT[..3]), Ok(Scan { used: 0, end: None }));
}

#[test]
fn a_prepare_ends_after_its_definitions() {
    frames_whole(Expect::Prepare, EOF_SHAPE, &prepare_answer(), TurnEnd::Done);
    let error = packet(1, b"\xff\x28\x04#42000You have an error");
    frames_whole(Expect::Prepare, EOF_SHAPE, &error, TurnEnd::Done);
    // Without EOFs (CLIENT_DEPRECATE_EOF): parameters then columns, nothing after them.
    let shape = Shape { deprecate_eof: true, progress: false };
    let mut two = packet(1, &[0, 1, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0]);
    two.extend(packet(2, b"\x03defparam1"));
    two.extend(packet(3, b"\x03defparam2"));
    two.extend(packet(4, b"\x03defcolumn"));
    frames_whole(Expect::Prepare, shape, &two, TurnEnd::Done);
}

#[test]
fn a_cursor_execute_ends_with_its_metadata_and_fetches_end_at_their_eof() {
    frames_whole(Expect::Result, EOF_SHAPE, &cursor_execute_answer(), TurnEnd::Done);
    for fetch in fetch_answers() {
        frames_whole(Expect::Rows, EOF_SHAPE, &fetch, TurnEnd::Done);
    }
}

#[test]
fn more_results_keep_the_answer_open() {
    let shape = Shape { deprecate_eof: true, progress: false };
    // OK with SERVER_MORE_RESULTS_EXISTS, a one-row set ended by an OK (0xFE), then an OK.
    let mut answer = packet(1, &[0, 0, 0, 0x0a, 0, 0, 0]);
    answer.extend(packet(2, &[1]));
    answer.extend(packet(
        3,
        b"\x03def\x00\x00\x00\x011\x00\x0c\x3f\x00\x01\x00\x00\x00\x08\x81\x00\x00\x00\x00",
    ));
    answer.extend(packet(4, b"\x011"));
    answer.extend(packet(5, &[0xfe, 0, 0, 0x0a, 0, 0, 0]));
    answer.extend(packet(6, &[0, 0, 0, 2, 0, 0, 0]));
    frames_whole(Expect::Result, shape, &answer, TurnEnd::Done);
    let mut cut = Framing::new(Expect::Result, shape);
    let first_set = answer.len() - 11;
    assert_eq!(scan_in_pieces(&mut cut, &answer[..first_set], &[]), (first_set, None));
}

#[test]
fn local_infile_waits_for_the_file_then_reads_the_result() {
    let mut framing = Framing::new(Expect::Result, EOF_SHAPE);
    framing.allow_files(vec![b"/tmp/data.csv".to_vec()]);
    let request = packet(1, b"\xfb/tmp/data.csv");
    assert_eq!(
        scan_in_pieces(&mut framing, &request, &[]),
        (request.len(), Some(TurnEnd::AwaitFile))
    );
    assert_eq!(framing.waiting_for(), Some(TurnEnd::AwaitFile));
    framing.resume();
    let ok = packet(4, &[0, 3, 0, 2, 0, 0, 0]);
    assert_eq!(scan_in_pieces(&mut framing, &ok, &[]), (ok.len(), Some(TurnEnd::Done)));
}

#[test]
fn auth_exchanges_end_at_ok_or_err_and_wait_for_the_client_otherwise() {
    let shape = Shape::default();
    let mut fast = packet(2, &[1, 3]);
    fast.extend(packet(3, &[0, 0, 0, 2, 0, 0, 0]));
    frames_whole(Expect::Auth, shape, &fast, TurnEnd::Done);
    let switch = packet(2, b"\xfemysql_native_password\0abcdefghijklmnopqrst\0");
    frames_whole(Expect::Auth, shape, &switch, TurnEnd::AwaitAuth);
    frames_whole(Expect::Login, shape, &packet(2, &[1, 4]), TurnEnd::AwaitAuth);
    let refused = packet(2, b"\xff\x15\x04#28000Access denied");
    frames_whole(Expect::Login, shape, &refused, TurnEnd::Closed);
    frames_whole(Expect::Auth, shape, &refused, TurnEnd::Done);
    let mut framing = Framing::new(Expect::Login, shape);
    assert_eq!(framing.scan(&switch).map(|s| s.end), Ok(Some(TurnEnd::AwaitAuth)));
    assert_eq!(framing.last_seq(), 2);
    framing.resume();
    let ok = packet(4, &[0, 0, 0, 2, 0, 0, 0]);
    assert_eq!(framing.scan(&ok).map(|s| s.end), Ok(Some(TurnEnd::Done)));
}

#[test]
fn progress_reports_end_nothing_when_the_client_asked_for_them() {
    let mut answer = packet(1, b"\xff\xff\xff\x01\x00\x01\x00\x10\x27\x00\x05stage");
    answer.extend(packet(2, &[0, 0, 0, 2, 0, 0, 0]));
    frames_whole(
        Expect::Result,
        Shape { deprecate_eof: false, progress: true },
        &answer,
        TurnEnd::Done,
    );
    let mut plain = Framing::new(Expect::Result, Shape::default());
    assert_eq!(plain.scan(&answer).map(|s| s.used), Ok(answer.len() - 11), "an ERR ends it");
}

#[test]
fn a_packet_of_16_mib_is_followed_by_its_continuation() {
    let mut framing = Framing::new(Expect::Rows, EOF_SHAPE);
    let mut big = vec![0xff, 0xff, 0xff, 1, 0xfe];
    big.resize(4 + packet::MAX_PAYLOAD, b'x');
    // The continuation starts with 0xFE and is short: it is part of the row, not its end.
    big.extend(packet(2, &[0xfe, 0, 0, 2, 0]));
    let eof = packet(3, &[0xfe, 0, 0, 2, 0]);
    big.extend(&eof);
    assert_eq!(framing.scan(&big), Ok(Scan { used: big.len(), end: Some(TurnEnd::Done) }));
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    let mut framing = Framing::new(Expect::Result, EOF_SHAPE);
    assert!(framing.scan(&packet(1, &[])).is_err(), "an empty result head");
    let mut done = Framing::new(Expect::OnePacket, EOF_SHAPE);
    let two = [packet(1, &[0, 0, 0, 2, 0, 0, 0]), packet(2, &[0])].concat();
    assert_eq!(done.scan(&two).map(|s| s.used), Ok(11), "stops at the end of the answer");
}

#[test]
fn the_tally_counts_and_never_overflows() {
    // Two results, each claiming u64::MAX affected rows (found by the fuzzer: an overflow).
    let huge = [0u8, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0a, 0, 0, 0];
    let more = [&huge[..10], &[0, status::MORE_RESULTS_EXISTS as u8, 0, 0, 0]].concat();
    let answer = [packet(1, &more), packet(2, &huge)].concat();
    let mut framing = Framing::new(Expect::Result, EOF_SHAPE);
    let scan = framing.scan(&answer);
    assert_eq!(scan.map(|s| (s.used, s.end)), Ok((answer.len(), Some(TurnEnd::Done))));
    assert_eq!(framing.tally.affected, u64::MAX);
    let mut failed = Framing::new(Expect::Result, EOF_SHAPE);
    let err = packet(1, b"\xff\x7a\x04#42S02no such table");
    assert_eq!(failed.scan(&err).map(|s| s.end), Ok(Some(TurnEnd::Done)));
    assert_eq!(failed.tally.error, Some(1146));
}

proptest! {
    #[test]
    fn any_bytes_any_split_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        cut in 0usize..300,
        deprecate_eof in any::<bool>(),
    ) {
        let shape = Shape { deprecate_eof, progress: true };
        for expect in [Expect::Result, Expect::Prepare, Expect::Rows, Expect::FieldList, Expect::Login] {
            let mut framing = Framing::new(expect, shape);
            let cut = cut.min(bytes.len());
            let mut buffer = bytes[..cut].to_vec();
            let Ok(scan) = framing.scan(&buffer) else { continue };
            prop_assert!(scan.used <= buffer.len());
            buffer.drain(..scan.used);
            buffer.extend_from_slice(&bytes[cut..]);
            if scan.end.is_none() && let Ok(again) = framing.scan(&buffer) {
                prop_assert!(again.used <= buffer.len());
            }
        }
    }
}

#[test]
fn pipelined_answers_end_after_the_last() {
    // PREPARE, a text query, a cursor execute and a ping, pipelined: answered in order.
    let ok = packet(1, &[0, 0, 0, 2, 0, 0, 0]);
    let answers = [prepare_answer(), TEXT_RESULT.to_vec(), cursor_execute_answer(), ok];
    let stream = answers.concat();
    let expects = [Expect::Prepare, Expect::Result, Expect::Result, Expect::OnePacket];
    let ends: Vec<u64> = answers
        .iter()
        .scan(0, |at, a| {
            *at += a.len() as u64;
            Some(*at)
        })
        .collect();
    for cut in 0..stream.len() {
        let mut framing = Framing::pipelined(expects, EOF_SHAPE).unwrap();
        let got = scan_in_pieces(&mut framing, &stream, &[cut]);
        assert_eq!(got, (stream.len(), Some(TurnEnd::Done)), "split at {cut}");
        let answered: Vec<u64> = framing.take_answered().iter().map(|a| a.end).collect();
        assert_eq!(answered, ends[..3], "split at {cut}");
    }
    // Each answer has its own tally: the prepare's statement id, the query's row.
    let mut framing = Framing::pipelined(expects[..2].iter().copied(), EOF_SHAPE).unwrap();
    assert_eq!(scan_in_pieces(&mut framing, &answers[..2].concat(), &[]).1, Some(TurnEnd::Done));
    let first = framing.take_answered()[0].tally;
    assert_eq!((first.statement_id, first.rows), (Some(2), 0));
    assert_eq!((framing.tally.statement_id, framing.tally.rows), (None, 1));
    assert!(Framing::pipelined([], EOF_SHAPE).is_none());
}

#[test]
fn a_file_request_inside_a_pipeline_is_refused() {
    // The upstream would take the pipelined command behind the LOAD DATA for the file.
    let infile = packet(1, b"\xfbdata.csv");
    let mut framing = Framing::pipelined([Expect::Result, Expect::OnePacket], EOF_SHAPE).unwrap();
    assert!(framing.scan(&infile).is_err());
    // As the last command, it is the client's turn to send the file.
    let mut last = Framing::pipelined([Expect::OnePacket, Expect::Result], EOF_SHAPE).unwrap();
    last.allow_files(vec![b"data.csv".to_vec()]);
    let stream = [packet(1, &[0, 0, 0, 2, 0, 0, 0]), infile].concat();
    assert_eq!(scan_in_pieces(&mut last, &stream, &[]), (stream.len(), Some(TurnEnd::AwaitFile)));
}

#[test]
fn an_error_in_a_pipeline_answers_its_command_only() {
    // The first command fails; the second is still answered.
    let err = packet(1, b"\xff\x7a\x04#42S02Table 'x' doesn't exist");
    let stream = [err, TEXT_RESULT.to_vec()].concat();
    let mut framing = Framing::pipelined([Expect::Result, Expect::Result], EOF_SHAPE).unwrap();
    assert_eq!(scan_in_pieces(&mut framing, &stream, &[]), (stream.len(), Some(TurnEnd::Done)));
    assert_eq!(framing.take_answered()[0].tally.error, Some(1146));
    // A boundary between two answers is where the next answer's first packet goes (seq 1).
    let mut framing = Framing::pipelined([Expect::OnePacket, Expect::Result], EOF_SHAPE).unwrap();
    let ok = packet(1, &[0, 0, 0, 2, 0, 0, 0]);
    assert_eq!(framing.scan(&ok).map(|s| s.used), Ok(ok.len()));
    assert_eq!(framing.next_seq_at_boundary(), Some(1));
}

#[test]
fn a_file_request_no_statement_named_breaks_the_answer() {
    // A rogue server answering `SELECT 1` with a request for the client's files.
    let rogue = packet(1, b"\xfb/home/dev/.ssh/id_ed25519");
    let mut framing = Framing::new(Expect::Result, EOF_SHAPE);
    assert!(framing.scan(&rogue).is_err(), "no LOAD DATA LOCAL was sent");
    let mut framing = Framing::new(Expect::Result, EOF_SHAPE);
    framing.allow_files(vec![b"data.csv".to_vec()]);
    assert!(framing.scan(&rogue).is_err(), "another file than the statement named");
    // A request cut in pieces is judged whole, once its name has arrived.
    let mut framing = Framing::new(Expect::Result, EOF_SHAPE);
    framing.allow_files(vec![b"/home/dev/.ssh/id_ed25519".to_vec()]);
    assert_eq!(
        scan_in_pieces(&mut framing, &rogue, &[3, 9]),
        (rogue.len(), Some(TurnEnd::AwaitFile))
    );
    // A row whose first column is NULL (0xfb) is a row, not a request.
    let mut rows = packet(1, &[1]);
    rows.extend(packet(2, b"\x03def\0\0\0\x01a\0\x0c\x21\0\x0b\0\0\0\xfd\0\0\0\0\0"));
    rows.extend(packet(3, &[0xfe, 0, 0, 2, 0]));
    rows.extend(packet(4, &[0xfb]));
    rows.extend(packet(5, &[0xfe, 0, 0, 2, 0]));
    let mut framing = Framing::new(Expect::Result, EOF_SHAPE);
    assert_eq!(scan_in_pieces(&mut framing, &rows, &[]), (rows.len(), Some(TurnEnd::Done)));
}
