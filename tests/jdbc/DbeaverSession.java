// Replays what DBeaver does through MariaDB Connector/J when it connects and browses a
// database, and prints every answer in a stable text form; the Rust test runs it directly
// and through the tunnel and compares the two outputs line by line.
import java.sql.*;

public class DbeaverSession {
    static StringBuilder out = new StringBuilder();

    static void line(String s) { out.append(s).append('\n'); }

    static void dump(ResultSet rs, boolean values) throws SQLException {
        ResultSetMetaData m = rs.getMetaData();
        for (int i = 1; i <= m.getColumnCount(); i++) {
            line("  col " + i + " label=" + m.getColumnLabel(i) + " name=" + m.getColumnName(i)
                + " table=" + m.getTableName(i) + " schema=" + m.getCatalogName(i)
                + " type=" + m.getColumnType(i) + "/" + m.getColumnTypeName(i)
                + " class=" + m.getColumnClassName(i) + " precision=" + m.getPrecision(i)
                + " scale=" + m.getScale(i) + " size=" + m.getColumnDisplaySize(i)
                + " nullable=" + m.isNullable(i) + " autoinc=" + m.isAutoIncrement(i)
                + " signed=" + m.isSigned(i) + " readonly=" + m.isReadOnly(i));
        }
        int rows = 0;
        while (rs.next()) {
            rows++;
            if (!values) continue;
            StringBuilder r = new StringBuilder("  row");
            for (int i = 1; i <= m.getColumnCount(); i++) r.append(" | ").append(rs.getString(i));
            line(r.toString());
        }
        line("  rows=" + rows);
    }

    static void query(Connection c, String sql, boolean values) throws SQLException {
        line("query: " + sql);
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) { dump(rs, values); }
        catch (SQLException e) { line("  error " + e.getErrorCode() + " " + e.getSQLState() + " " + e.getMessage()); }
    }

    public static void main(String[] args) throws Exception {
        // args: port, [options], [scheme: "mariadb" (default) or "mysql" for Oracle's driver]
        String scheme = args.length > 2 ? args[2] : "mariadb";
        String url = "jdbc:" + scheme + "://127.0.0.1:" + args[0] + "/tunnel_test?user=app&password=app-pw"
            + (args.length > 1 && !args[1].isEmpty() ? "&" + args[1] : "");
        try (Connection c = DriverManager.getConnection(url)) {
            DatabaseMetaData md = c.getMetaData();
            line("product " + md.getDatabaseProductName() + " " + md.getDatabaseProductVersion());
            line("driver sees catalog " + c.getCatalog() + " autocommit " + c.getAutoCommit());
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE IF EXISTS dbeaver_t");
                s.execute("CREATE TABLE dbeaver_t (id INT UNSIGNED AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40) NOT NULL, "
                    + "price DECIMAL(10,2), created DATETIME(3), note TEXT, flag BIT(1), data BLOB, KEY (name))");
                s.executeUpdate("INSERT INTO dbeaver_t (name, price, created, note, flag, data) VALUES "
                    + "('alpha', 1.50, '2024-01-02 03:04:05.678', NULL, b'1', x'00ff'), ('beta', NULL, NULL, 'n', b'0', NULL)");
            }
            // What DBeaver sends when it connects.
            query(c, "SELECT @@max_allowed_packet, @@system_time_zone, @@time_zone, @@auto_increment_increment, @@sql_mode, @@lower_case_table_names", false);
            try (Statement s = c.createStatement()) { s.execute("SET character_set_results = NULL"); s.execute("SET autocommit=1"); }
            query(c, "SELECT DATABASE()", true);
            query(c, "SHOW ENGINES", false);
            query(c, "SHOW CHARSET", false);
            query(c, "SHOW COLLATION", false);
            query(c, "SHOW PLUGINS", false);
            query(c, "SHOW DATABASES", true);
            query(c, "SHOW FULL TABLES FROM tunnel_test LIKE 'dbeaver_t'", true);
            query(c, "SHOW TABLE STATUS FROM tunnel_test LIKE 'dbeaver_t'", false);
            query(c, "SHOW FULL COLUMNS FROM tunnel_test.dbeaver_t", true);
            query(c, "SHOW INDEX FROM tunnel_test.dbeaver_t", true);
            query(c, "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA='tunnel_test' AND TABLE_NAME='dbeaver_t' ORDER BY ORDINAL_POSITION", true);
            query(c, "SELECT * FROM dbeaver_t LIMIT 200", true);
            query(c, "SELECT no_such_column FROM dbeaver_t", true);
            // Driver metadata calls DBeaver's navigator uses.
            try (ResultSet rs = md.getColumns("tunnel_test", null, "dbeaver_t", "%")) { line("getColumns"); dump(rs, true); }
            try (ResultSet rs = md.getPrimaryKeys("tunnel_test", null, "dbeaver_t")) { line("getPrimaryKeys"); dump(rs, true); }
            // Edit one row through an updatable result set, as DBeaver's grid does.
            try (Statement s = c.createStatement(ResultSet.TYPE_FORWARD_ONLY, ResultSet.CONCUR_UPDATABLE);
                 ResultSet rs = s.executeQuery("SELECT id, name, price FROM dbeaver_t WHERE id = 1")) {
                rs.next();
                rs.updateString("name", "alpha-edited");
                rs.updateRow();
            }
            query(c, "SELECT id, name FROM dbeaver_t ORDER BY id", true);
            // A prepared statement (client-side by default, server-side with useServerPrepStmts).
            try (PreparedStatement p = c.prepareStatement("SELECT name, price FROM dbeaver_t WHERE id = ? AND name <> ?")) {
                p.setInt(1, 2); p.setString(2, "x");
                try (ResultSet rs = p.executeQuery()) { line("prepared"); dump(rs, true); }
            }
            // A BLOB from a stream, as DBeaver's "load from file" does (with server-side prepared
            // statements Connector/J sends it with COM_STMT_SEND_LONG_DATA).
            byte[] blob = new byte[60_000];
            for (int i = 0; i < blob.length; i++) blob[i] = (byte) (i * 31 + 7);
            try (PreparedStatement p = c.prepareStatement("UPDATE dbeaver_t SET data = ? WHERE id = ?")) {
                p.setBinaryStream(1, new java.io.ByteArrayInputStream(blob), blob.length);
                p.setInt(2, 2);
                line("blob update count " + p.executeUpdate());
            }
            query(c, "SELECT LENGTH(data), MD5(data) FROM dbeaver_t WHERE id = 2", true);
            // Batches, as DBeaver's grid saves several edited rows or an import runs: MariaDB's
            // driver sends a batch's statements without waiting for each answer (pipelined).
            try (PreparedStatement p = c.prepareStatement("INSERT INTO dbeaver_t (name, price) VALUES (?, ?)")) {
                for (int i = 0; i < 50; i++) { p.setString(1, "batch-" + i); p.setInt(2, i); p.addBatch(); }
                line("batch counts " + java.util.Arrays.toString(p.executeBatch()));
            }
            try (Statement s = c.createStatement()) {
                for (int i = 0; i < 20; i++) {
                    // The eleventh fails (name is NOT NULL): the statements around it still run.
                    s.addBatch(i == 10 ? "INSERT INTO dbeaver_t (name) VALUES (NULL)"
                        : "UPDATE dbeaver_t SET price = price + 1 WHERE name = 'batch-" + i + "'");
                }
                try { line("statement batch counts " + java.util.Arrays.toString(s.executeBatch())); }
                catch (BatchUpdateException e) {
                    line("statement batch error " + e.getErrorCode() + " counts " + java.util.Arrays.toString(e.getUpdateCounts()));
                }
            }
            query(c, "SELECT COUNT(*), SUM(price) FROM dbeaver_t WHERE name LIKE 'batch-%'", true);
            // A transaction and its rollback.
            c.setAutoCommit(false);
            try (Statement s = c.createStatement()) { line("update count " + s.executeUpdate("UPDATE dbeaver_t SET price = 9 WHERE id = 2")); }
            c.rollback();
            c.setAutoCommit(true);
            query(c, "SELECT price FROM dbeaver_t WHERE id = 2", true);
            try (Statement s = c.createStatement()) { s.execute("DROP TABLE dbeaver_t"); }
            // Statement.cancel(): Connector/J sends KILL QUERY <handshake id> on a new connection.
            try (Statement s = c.createStatement()) {
                Thread canceller = new Thread(() -> {
                    try { Thread.sleep(700); s.cancel(); } catch (Exception e) { line("cancel failed " + e); }
                });
                long start = System.nanoTime();
                canceller.start();
                try { s.executeQuery("SELECT SLEEP(60)"); line("cancel: not interrupted"); }
                catch (SQLException e) { line("cancel: error " + e.getErrorCode() + " " + e.getSQLState()); }
                canceller.join();
                line("cancel: within 5 s " + ((System.nanoTime() - start) < 5_000_000_000L));
            }
            query(c, "SELECT 'still usable after cancel'", true);
        }
        System.out.print(out);
    }
}
