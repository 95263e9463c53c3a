// Runs the compressed-protocol queries through whichever JDBC driver is on the classpath, with
// the URL as given (useCompression=true); prints one line per answer: row count and a checksum
// of the rows, or the error.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.zip.CRC32;

public class CompressedQueries {
    public static void main(String[] args) throws Exception {
        String[] queries = {
            "SELECT seq, REPEAT('x', 100) FROM seq_1_to_20000",
            "SELECT REPEAT('y', 70000)",
            "SELECT 1, 'short'",
            "SELECT no_such_column",
        };
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2]);
             Statement s = c.createStatement()) {
            for (String sql : queries) {
                try (ResultSet rs = s.executeQuery(sql)) {
                    int columns = rs.getMetaData().getColumnCount();
                    CRC32 crc = new CRC32();
                    int rows = 0;
                    while (rs.next()) {
                        rows++;
                        for (int i = 1; i <= columns; i++) {
                            crc.update(String.valueOf(rs.getString(i)).getBytes("UTF-8"));
                        }
                    }
                    System.out.println(rows + " rows | " + Long.toHexString(crc.getValue()));
                } catch (SQLException e) {
                    System.out.println("error | " + e.getErrorCode() + " | " + e.getMessage());
                }
            }
        }
    }
}
