//! Answers captured field by field (column metadata, row bytes, OK fields, errors) so that a
//! tunnel's answer can be compared with a direct connection's.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

/// Rows of a result set, each value as raw bytes or NULL.
pub type Rows = Vec<Vec<Option<Vec<u8>>>>;
/// A result set: one metadata line per column, then the rows.
pub type ResultSet = (Vec<String>, Rows);

/// Everything a client can observe about one statement's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Result sets (possibly none) and the final OK fields.
    Ok {
        /// Each result set: column metadata lines and rows.
        sets: Vec<ResultSet>,
        /// affected rows, last insert id, warnings, info, status flags.
        ok: (u64, Option<u64>, u16, String, u16),
    },
    /// A server error.
    Err {
        /// Code.
        code: u16,
        /// SQLSTATE.
        state: String,
        /// Message.
        message: String,
    },
}

/// One column's metadata, every field, as a line.
pub fn column_line(c: &mysql_async::Column) -> String {
    format!(
        "schema={:?} table={:?} org_table={:?} name={:?} org_name={:?} charset={} length={} type={:?} flags={:?} decimals={}",
        c.schema_str(),
        c.table_str(),
        c.org_table_str(),
        c.name_str(),
        c.org_name_str(),
        c.character_set(),
        c.column_length(),
        c.column_type(),
        c.flags(),
        c.decimals()
    )
}

/// Prepares `sql`, executes it with `params` (binary protocol) and captures the answer.
pub async fn exec_answer(conn: &mut Conn, sql: &str, params: Vec<Value>) -> Answer {
    let stmt = match conn.prep(sql).await {
        Ok(stmt) => stmt,
        Err(mysql_async::Error::Server(e)) => {
            return Answer::Err { code: e.code, state: e.state, message: e.message };
        }
        Err(other) => panic!("non-server error preparing {sql:?}: {other}"),
    };
    let params = if params.is_empty() {
        mysql_async::Params::Empty
    } else {
        mysql_async::Params::Positional(params)
    };
    let answer = match conn.exec_iter(&stmt, params).await {
        Ok(mut result) => {
            let columns = result.columns();
            let rows: Result<Vec<Row>, _> = result.collect().await;
            match rows {
                Ok(rows) => {
                    let meta =
                        columns.map(|c| c.iter().map(column_line).collect()).unwrap_or_default();
                    let rows = rows
                        .into_iter()
                        .map(|r| {
                            r.unwrap()
                                .into_iter()
                                .map(|v| Some(format!("{v:?}").into_bytes()))
                                .collect()
                        })
                        .collect();
                    drop(result);
                    Answer::Ok { sets: vec![(meta, rows)], ok: ok_fields(conn) }
                }
                Err(mysql_async::Error::Server(e)) => {
                    Answer::Err { code: e.code, state: e.state, message: e.message }
                }
                Err(other) => panic!("non-server error executing {sql:?}: {other}"),
            }
        }
        Err(mysql_async::Error::Server(e)) => {
            Answer::Err { code: e.code, state: e.state, message: e.message }
        }
        Err(other) => panic!("non-server error executing {sql:?}: {other}"),
    };
    conn.close(stmt).await.expect("close statement");
    answer
}

/// Runs `sql` on `conn` and captures the answer.
pub async fn answer_of(conn: &mut Conn, sql: &str) -> Answer {
    let server_err = |e: mysql_async::Error| match e {
        mysql_async::Error::Server(e) => {
            Answer::Err { code: e.code, state: e.state, message: e.message }
        }
        other => panic!("non-server error for {sql:?}: {other}"),
    };
    let mut result = match conn.query_iter(sql).await {
        Ok(r) => r,
        Err(e) => return server_err(e),
    };
    let mut sets = Vec::new();
    loop {
        let columns = result.columns();
        let set: Result<Vec<Row>, _> = result.collect().await;
        let rows = match set {
            Ok(rows) => rows,
            Err(e) => return server_err(e),
        };
        if let Some(cols) = columns.filter(|c| !c.is_empty()) {
            let meta = cols.iter().map(column_line).collect();
            let rows = rows
                .into_iter()
                .map(|r| r.unwrap().into_iter().map(value_bytes).collect())
                .collect();
            sets.push((meta, rows));
        }
        if result.is_empty() {
            break;
        }
    }
    drop(result);
    Answer::Ok { sets, ok: ok_fields(conn) }
}

/// The OK fields a client sees after an answer: affected rows, last insert id, warnings,
/// info, status flags.
fn ok_fields(conn: &Conn) -> (u64, Option<u64>, u16, String, u16) {
    let status = conn.last_ok_packet().map_or(0, |ok| ok.status_flags().bits());
    (
        conn.affected_rows(),
        conn.last_insert_id(),
        conn.get_warnings(),
        conn.info().into_owned(),
        status,
    )
}

fn value_bytes(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::NULL => None,
        Value::Bytes(b) => Some(b),
        other => Some(format!("{other:?}").into_bytes()),
    }
}

/// Runs each statement of `script` on both connections in turn (all on `a`, then all on `b`)
/// and returns both answer lists.
pub async fn compare_script(
    a: &mut Conn,
    b: &mut Conn,
    script: &[&str],
) -> (Vec<Answer>, Vec<Answer>) {
    let mut left = Vec::new();
    for sql in script {
        left.push(answer_of(a, sql).await);
    }
    let mut right = Vec::new();
    for sql in script {
        right.push(answer_of(b, sql).await);
    }
    (left, right)
}

/// Asserts two answer lists are identical, naming the first statement that differs.
pub fn assert_same_answers(script: &[&str], direct: &[Answer], tunnel: &[Answer]) {
    assert_eq!(direct.len(), tunnel.len());
    for (i, (d, t)) in direct.iter().zip(tunnel).enumerate() {
        assert_eq!(d, t, "answers differ for statement {i}: {}", script[i]);
    }
}
