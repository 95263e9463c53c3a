// Times a DBeaver-like connect sequence through MariaDB Connector/J (its default settings):
// connect, read the server's metadata, the first queries a SQL editor runs, list the
// databases, close. Prints the median over the rounds, in milliseconds, after one warm-up.
import java.sql.*;
import java.util.Arrays;

public class ConnectTiming {
    static void once(String url) throws SQLException {
        try (Connection c = DriverManager.getConnection(url)) {
            DatabaseMetaData meta = c.getMetaData();
            meta.getDatabaseProductVersion();
            try (Statement s = c.createStatement()) {
                try (ResultSet rs = s.executeQuery("SELECT DATABASE(), @@sql_mode, @@autocommit")) { rs.next(); }
                try (ResultSet rs = s.executeQuery("SHOW VARIABLES LIKE 'lower_case_table_names'")) { while (rs.next()) {} }
            }
            try (ResultSet rs = meta.getCatalogs()) { while (rs.next()) {} }
        }
    }

    public static void main(String[] args) throws Exception {
        // args: port, rounds
        String url = "jdbc:mariadb://127.0.0.1:" + args[0] + "/tunnel_test?user=app&password=app-pw";
        int rounds = Integer.parseInt(args[1]);
        once(url);
        double[] ms = new double[rounds];
        for (int i = 0; i < rounds; i++) {
            long start = System.nanoTime();
            once(url);
            ms[i] = (System.nanoTime() - start) / 1e6;
        }
        Arrays.sort(ms);
        System.out.printf("%.1f%n", ms[rounds / 2]);
    }
}
