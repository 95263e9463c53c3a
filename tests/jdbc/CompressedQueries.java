// Runs queries through whichever JDBC driver is on the classpath, with the URL as given
// (useCompression=true); prints one line per answer: row count (summed over its result sets)
// and a checksum of the rows, or the error.
//
// Usage: java CompressedQueries URL USER PASSWORD SQL...
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.zip.CRC32;

public class CompressedQueries {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2]);
             Statement s = c.createStatement()) {
            for (int q = 3; q < args.length; q++) {
                try {
                    CRC32 crc = new CRC32();
                    int rows = 0;
                    boolean isSet = s.execute(args[q]);
                    while (isSet || s.getUpdateCount() != -1) {
                        if (isSet) {
                            try (ResultSet rs = s.getResultSet()) {
                                int columns = rs.getMetaData().getColumnCount();
                                while (rs.next()) {
                                    rows++;
                                    for (int i = 1; i <= columns; i++) {
                                        byte[] v = rs.getBytes(i);
                                        crc.update(v == null ? new byte[] {0} : v);
                                    }
                                }
                            }
                        }
                        isSet = s.getMoreResults();
                    }
                    System.out.println(rows + " rows | " + Long.toHexString(crc.getValue()));
                } catch (SQLException e) {
                    System.out.println("error | " + e.getErrorCode() + " | " + e.getMessage());
                }
            }
        }
    }
}
