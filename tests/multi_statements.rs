//! Multi-statements follow the client's choice, as on the server: a client without
//! CLIENT_MULTI_STATEMENTS (PyMySQL's default, Connector/J without allowMultiQueries) gets the
//! server's parse error for `a; b`, COM_SET_OPTION switches it, compared with direct.

use e2e::raw::{CAPS, RawClient};
use e2e::{DATABASE, PASSWORD, Tunnel, USER, clients, mysql_port, within};

const MULTI_STATEMENTS: u32 = 0x0001_0000;
const SET_OPTION: u8 = 0x1b;

const QUERIES: &[&str] = &[
    "SELECT 1; SELECT 2",
    "SELECT 1;",
    "SELECT 1 ; ;  ",
    "SELECT 1; -- a comment",
    "SELECT ';' AS semicolon",
    "SELECT ';' ; SELECT 2",
    "SELECT 1;\n\nSELECT 2 /* x */",
    "DROP TABLE IF EXISTS ms_t; CREATE TABLE ms_t (id INT)",
    "SHOW TABLES LIKE 'ms_t'",
    "DROP PROCEDURE IF EXISTS ms_p",
    "CREATE PROCEDURE ms_p() BEGIN SELECT 1; SELECT 2; END",
    "CALL ms_p()",
    "DROP PROCEDURE ms_p",
    "SELEC 1; SELECT 2",
];

async fn pymysql_answers(port: u16, multi: &str) -> String {
    let port = port.to_string();
    let mut args = vec![port.as_str(), USER, PASSWORD, DATABASE, multi];
    args.extend_from_slice(QUERIES);
    clients::python("pymysql_queries.py", &args).await
}

#[tokio::test]
async fn pymysql_with_and_without_multi_statements_matches_direct() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        for multi in ["single", "multi"] {
            let direct = pymysql_answers(mysql_port(), multi).await;
            let through = pymysql_answers(tunnel.sidecar.port(), multi).await;
            for (d, t) in direct.lines().zip(through.lines()) {
                assert_eq!(t, d, "{multi}");
            }
            assert_eq!(direct.lines().count(), QUERIES.len(), "{direct}");
            assert_eq!(through.lines().count(), QUERIES.len(), "{through}");
            let refused = through.lines().filter(|l| l.contains("[1064,")).count();
            assert_eq!(refused, if multi == "single" { 5 } else { 1 }, "{through}");
        }
    })
    .await;
}

/// Every packet of each step: the query refused, COM_SET_OPTION on, the query's two result
/// sets, COM_SET_OPTION off, refused again, an unknown option.
async fn set_option_session(port: u16) -> Vec<Vec<Vec<u8>>> {
    let mut c =
        RawClient::login_with_caps(port, USER, PASSWORD, DATABASE, CAPS & !MULTI_STATEMENTS).await;
    let query = b"\x03SELECT 1; SELECT 2";
    vec![
        c.command_all(query).await,
        c.command_until_eof(&[SET_OPTION, 0, 0]).await,
        c.command_all(query).await,
        c.command_until_eof(&[SET_OPTION, 1, 0]).await,
        c.command_all(query).await,
        c.command_until_eof(&[SET_OPTION, 7, 0]).await,
        c.command_all(b"\x03SELECT 3").await,
    ]
}

#[tokio::test]
async fn com_set_option_toggles_multi_statements_like_the_server() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let direct = set_option_session(mysql_port()).await;
        let through = set_option_session(tunnel.sidecar.port()).await;
        assert_eq!(direct[0][0][0], 0xff, "refused directly");
        assert_eq!(direct[2].len(), 10, "two result sets directly: {:?}", direct[2]);
        for (step, (d, t)) in direct.iter().zip(&through).enumerate() {
            assert_eq!(t, d, "step {step}");
        }
    })
    .await;
}
