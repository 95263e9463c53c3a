//! Runs one client command on a session's upstream connection: the dispatch by command byte
//! and the commands answered here (queries, USE, ping, statistics, field list, reset); the
//! answers are encoded by [`crate::results`].

use bytes::BufMut;
use common::mysql::{command, error_code, status};
use common::wire::{
    encode_end, encode_err, encode_ok, list_begin, list_finish, list_item_begin, list_item_finish,
};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use crate::infile::InfileBridge;
use crate::pool::PoolKey;
use crate::results::{
    Pending, RowFormat, encode_columns, encode_mysql_error, finish, ok_info, refuse_infile,
    serving_infile, stream_sets,
};
use crate::run::Extras;
use crate::session::Session;
use crate::sink::{ClientGone, FrameSink};
use crate::statement_text::{may_hold_several_statements, statement_end};

/// What became of the upstream connection after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The connection can run the next command.
    Healthy,
    /// The connection broke and must be dropped.
    Broken,
}

/// Runs the command in `payload` (a MySQL command packet payload) and streams its answer.
pub async fn execute(
    conn: &mut Conn,
    payload: &[u8],
    sink: &mut FrameSink,
    session: &Session,
    extras: &Extras,
) -> Result<Outcome, ClientGone> {
    let Some((&cmd, args)) = payload.split_first() else {
        encode_err(
            sink.buf(),
            error_code::HANDSHAKE,
            error_code::STATE_COMM,
            b"Empty command packet",
        );
        return Ok(Outcome::Healthy);
    };
    match cmd {
        command::QUERY if extras.single_statement => {
            single_statement_query(conn, args, sink, &session.infile).await
        }
        command::QUERY => query(conn, args, sink, Some(&session.infile)).await,
        command::INIT_DB => query(conn, &use_statement(args), sink, None).await,
        command::PING => match conn.ping().await {
            Ok(()) => {
                encode_ok(sink.buf(), &ok_info(conn.last_ok_packet(), status::AUTOCOMMIT));
                Ok(Outcome::Healthy)
            }
            Err(e) => Ok(encode_mysql_error(sink, e)),
        },
        command::FIELD_LIST => field_list(conn, args, sink).await,
        command::STATISTICS => statistics(conn, sink).await,
        command::STMT_PREPARE => session.statements.prepare(conn, args, sink).await,
        command::STMT_EXECUTE => {
            session.statements.execute(conn, args, sink, &extras.long_data).await
        }
        command::REFRESH => refresh(conn, args, sink).await,
        command::SHUTDOWN => query(conn, b"SHUTDOWN", sink, None).await,
        command::PROCESS_INFO => query(conn, b"SHOW PROCESSLIST", sink, None).await,
        command::RESET_CONNECTION => match reset_connection(conn, &session.key).await {
            Ok(()) => {
                encode_ok(sink.buf(), &ok_info(conn.last_ok_packet(), status::AUTOCOMMIT));
                Ok(Outcome::Healthy)
            }
            Err(e) => Ok(encode_mysql_error(sink, e)),
        },
        other => {
            let msg = format!("Unknown command 0x{other:02x}");
            encode_err(sink.buf(), error_code::UNKNOWN_COMMAND, b"08S01", msg.as_bytes());
            Ok(Outcome::Healthy)
        }
    }
}

/// COM_REFRESH: the statements its flags stand for, kept out of the binary log as the
/// command's own reload is. REFRESH_THREADS (0x20) only empties the server's thread cache:
/// nothing a client can observe, and no statement does it.
async fn refresh(
    conn: &mut Conn,
    args: &[u8],
    sink: &mut FrameSink,
) -> Result<Outcome, ClientGone> {
    let flags = args.first().copied().unwrap_or(0);
    let statements = [
        (0x01, "FLUSH NO_WRITE_TO_BINLOG PRIVILEGES"),
        (0x02, "FLUSH NO_WRITE_TO_BINLOG LOGS"),
        (0x04, "FLUSH NO_WRITE_TO_BINLOG TABLES"),
        (0x08, "FLUSH NO_WRITE_TO_BINLOG HOSTS"),
        (0x10, "FLUSH NO_WRITE_TO_BINLOG STATUS"),
        (0x40, "RESET SLAVE"),
        (0x80, "RESET MASTER"),
    ];
    for (_, sql) in statements.into_iter().filter(|(bit, _)| flags & bit != 0) {
        if let Err(e) = conn.query_drop(sql).await {
            return Ok(encode_mysql_error(sink, e));
        }
    }
    encode_ok(sink.buf(), &ok_info(conn.last_ok_packet(), status::AUTOCOMMIT));
    Ok(Outcome::Healthy)
}

/// COM_RESET_CONNECTION: the server's reset (transaction, temporary tables, variables), then
/// what the client's login set up (collation, session flags), as a direct server keeps them.
async fn reset_connection(conn: &mut Conn, key: &PoolKey) -> mysql_async::Result<()> {
    conn.reset().await?;
    crate::upstream::apply_session_flags(conn, key.session_flags()).await?;
    crate::upstream::apply_collation(conn, key.collation()).await
}

/// `USE `db`` for COM_INIT_DB.
fn use_statement(db: &[u8]) -> Vec<u8> {
    [&b"USE "[..], &quoted_identifier(db)].concat()
}

/// An identifier in backticks, backticks inside it doubled.
fn quoted_identifier(name: &[u8]) -> Vec<u8> {
    let mut quoted = Vec::with_capacity(name.len() + 2);
    quoted.push(b'`');
    for &b in name {
        if b == b'`' {
            quoted.push(b'`');
        }
        quoted.push(b);
    }
    quoted.push(b'`');
    quoted
}

/// Runs a text query and streams every result set it produces.
/// COM_QUERY for a client with multi-statements off. The upstream connection always allows
/// them (mysql_async sets the flag and cannot send COM_SET_OPTION), so text that may hold more
/// than one statement is first parsed upstream as one prepared statement, never executed: the
/// server's own parse error (1064, same text as for the query) refuses it, as the server would.
async fn single_statement_query(
    conn: &mut Conn,
    sql: &[u8],
    sink: &mut FrameSink,
    infile: &InfileBridge,
) -> Result<Outcome, ClientGone> {
    let mut sql = sql;
    if may_hold_several_statements(sql) {
        match conn.prep(sql).await {
            Ok(statement) => {
                if let Err(e) = conn.close(statement).await {
                    return Ok(encode_mysql_error(sink, e));
                }
                // One statement: trailing comments must not become an extra empty result.
                sql = statement_end(sql).map_or(sql, |end| &sql[..end]);
            }
            Err(mysql_async::Error::Server(e)) if e.code == error_code::PARSE_ERROR => {
                return Ok(encode_mysql_error(sink, mysql_async::Error::Server(e)));
            }
            // Not preparable (a compound CREATE PROCEDURE…): the server parsed it as one.
            Err(mysql_async::Error::Server(_)) => {}
            Err(e) => return Ok(encode_mysql_error(sink, e)),
        }
    }
    query(conn, sql, sink, Some(infile)).await
}

/// COM_QUERY. The upstream may ask for a local file while any of its results is read
/// (LOAD DATA LOCAL INFILE): `infile` answers in order with the rest of the output.
async fn query(
    conn: &mut Conn,
    sql: &[u8],
    sink: &mut FrameSink,
    infile: Option<&InfileBridge>,
) -> Result<Outcome, ClientGone> {
    let mut events = infile.map(InfileBridge::open);
    let result = {
        let next = conn.query_iter(sql);
        tokio::pin!(next);
        let poll = |cx: &mut std::task::Context<'_>| next.as_mut().poll(cx);
        serving_infile(poll, events.as_mut(), sink, &mut Pending::Nothing, 0).await?
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => return Ok(encode_mysql_error(sink, e)),
    };
    if events.as_mut().is_some_and(|e| std::mem::take(&mut e.refused)) {
        return Ok(refuse_infile(sink));
    }
    let streamed = stream_sets(result, sink, RowFormat::Text, events.as_mut()).await?;
    drop(events);
    Ok(finish(conn, sink, streamed))
}

/// COM_STATISTICS: the server's status line, built from the upstream's global status in the
/// server's own format (sent as a one-packet `Rows` frame: the answer is a bare string).
async fn statistics(conn: &mut Conn, sink: &mut FrameSink) -> Result<Outcome, ClientGone> {
    let sql = "SHOW GLOBAL STATUS WHERE Variable_name IN \
               ('Uptime','Threads_connected','Questions','Slow_queries','Opened_tables','Open_tables')";
    let rows: Vec<(String, u64)> = match conn.query(sql).await {
        Ok(rows) => rows,
        Err(e) => return Ok(encode_mysql_error(sink, e)),
    };
    let get =
        |name: &str| rows.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map_or(0, |(_, v)| *v);
    let uptime = get("Uptime").max(1);
    let questions = get("Questions");
    let per_second_milli = questions * 1000 / uptime;
    let line = format!(
        "Uptime: {uptime}  Threads: {}  Questions: {questions}  Slow queries: {}  Opens: {}  Open tables: {}  Queries per second avg: {}.{:03}",
        get("Threads_connected"),
        get("Slow_queries"),
        get("Opened_tables"),
        get("Open_tables"),
        per_second_milli / 1000,
        per_second_milli % 1000
    );
    let buf = sink.buf();
    let mark = list_begin(buf, true);
    let item = list_item_begin(buf);
    buf.put_slice(line.as_bytes());
    list_item_finish(buf, item);
    list_finish(buf, mark);
    Ok(Outcome::Healthy)
}

/// COM_FIELD_LIST: the table's column definitions (what `SELECT * … LIMIT 0` reports).
async fn field_list(
    conn: &mut Conn,
    args: &[u8],
    sink: &mut FrameSink,
) -> Result<Outcome, ClientGone> {
    let table = args.split(|&b| b == 0).next().unwrap_or_default();
    let mut sql = b"SELECT * FROM ".to_vec();
    sql.extend_from_slice(&quoted_identifier(table));
    sql.extend_from_slice(b" LIMIT 0");
    let columns = match conn.query_iter(sql).await {
        Ok(result) => {
            let columns = result.columns().unwrap_or_else(|| std::sync::Arc::from(Vec::new()));
            if let Err(e) = result.drop_result().await {
                return Ok(encode_mysql_error(sink, e));
            }
            columns
        }
        Err(e) => return Ok(encode_mysql_error(sink, e)),
    };
    encode_columns(sink, &columns, true);
    let ok = ok_info(conn.last_ok_packet(), status::AUTOCOMMIT);
    encode_end(sink.buf(), ok.status, ok.warnings);
    Ok(Outcome::Healthy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_statement_quotes_backticks() {
        assert_eq!(use_statement(b"a`b"), b"USE `a``b`".to_vec());
    }
}
