//! Server-side prepared statements: COM_STMT_PREPARE, COM_STMT_EXECUTE (binary protocol) and
//! COM_STMT_CLOSE on a session's upstream connection. Statement ids are the upstream's; the
//! statement cache of `mysql_async` is off, so two prepares of one SQL text stay independent.

use std::collections::HashMap;
use std::sync::Mutex;

use common::mysql::error_code;
use common::wire::{encode_err, encode_prepared};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Statement};

use crate::binary::{self, ParamType};
use crate::command::Outcome;
use crate::results::{RowFormat, encode_columns, encode_mysql_error, finish, stream_sets};
use crate::sink::{ClientGone, FrameSink};

/// ER_UNKNOWN_STMT_HANDLER.
const UNKNOWN_STATEMENT: u16 = 1243;
/// ER_WRONG_ARGUMENTS.
const WRONG_ARGUMENTS: u16 = 1210;

/// A prepared statement and the parameter types last bound to it.
#[derive(Debug, Clone)]
struct Prepared {
    stmt: Statement,
    types: Option<Vec<ParamType>>,
}

/// The prepared statements of one session.
#[derive(Debug, Default)]
pub struct Statements(Mutex<HashMap<u32, Prepared>>);

impl Statements {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Prepared>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// COM_STMT_PREPARE: the statement's id and parameter and column definitions.
    pub async fn prepare(
        &self,
        conn: &mut Conn,
        sql: &[u8],
        sink: &mut FrameSink,
    ) -> Result<Outcome, ClientGone> {
        let stmt = match conn.prep(sql).await {
            Ok(stmt) => stmt,
            Err(e) => return Ok(encode_mysql_error(sink, e)),
        };
        encode_prepared(
            sink.buf(),
            stmt.id(),
            stmt.num_columns(),
            stmt.num_params(),
            conn.get_warnings(),
        );
        if stmt.num_params() > 0 {
            encode_columns(sink, stmt.params(), false);
        }
        if stmt.num_columns() > 0 {
            encode_columns(sink, &stmt.columns(), false);
        }
        self.lock().insert(stmt.id(), Prepared { stmt, types: None });
        Ok(Outcome::Healthy)
    }

    /// COM_STMT_EXECUTE: runs the statement and streams a binary result.
    pub async fn execute(
        &self,
        conn: &mut Conn,
        args: &[u8],
        sink: &mut FrameSink,
        long_data: &[(u16, bytes::Bytes)],
    ) -> Result<Outcome, ClientGone> {
        let id = binary::statement_id(args).unwrap_or(0);
        let Some(prepared) = self.lock().get(&id).cloned() else {
            let msg =
                format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute");
            encode_err(sink.buf(), UNKNOWN_STATEMENT, error_code::STATE_GENERAL, msg.as_bytes());
            return Ok(Outcome::Healthy);
        };
        let params = usize::from(prepared.stmt.num_params());
        let request =
            match binary::parse_execute(args, params, prepared.types.as_deref(), long_data) {
                Ok(request) => request,
                Err(why) => {
                    let msg = format!("Incorrect arguments to mysqld_stmt_execute ({why})");
                    encode_err(
                        sink.buf(),
                        WRONG_ARGUMENTS,
                        error_code::STATE_GENERAL,
                        msg.as_bytes(),
                    );
                    return Ok(Outcome::Healthy);
                }
            };
        if let Some(types) = request.types {
            if let Some(p) = self.lock().get_mut(&id) {
                p.types = Some(types);
            }
        }
        let params = if request.values.is_empty() {
            Params::Empty
        } else {
            Params::Positional(request.values)
        };
        let result = match conn.exec_iter(&prepared.stmt, params).await {
            Ok(result) => result,
            Err(e) => return Ok(encode_mysql_error(sink, e)),
        };
        let streamed = stream_sets(result, sink, RowFormat::Binary, None).await?;
        Ok(finish(conn, sink, streamed))
    }

    /// COM_STMT_CLOSE for each id (the client expects no answer).
    pub async fn close(&self, conn: &mut Conn, ids: &[u32]) {
        for id in ids {
            let removed = self.lock().remove(id);
            if let Some(p) = removed {
                if let Err(e) = conn.close(p.stmt).await {
                    tracing::debug!(error = %e, statement = id, "closing a statement failed");
                }
            }
        }
    }
}
