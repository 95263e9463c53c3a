// Logs in with MariaDB Connector/J and prints who the server says we are, or the error.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

public class PassthroughLogin {
    public static void main(String[] args) throws Exception {
        String url = "jdbc:mariadb://127.0.0.1:" + args[0] + "/" + args[3] + "?connectTimeout=10000&" + args[4];
        try (Connection c = DriverManager.getConnection(url, args[1], args[2]);
             Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT CURRENT_USER(), DATABASE()")) {
            rs.next();
            System.out.println("user | " + rs.getString(1) + " | " + rs.getString(2));
        } catch (SQLException e) {
            System.out.println("error | " + e.getErrorCode() + " | " + e.getSQLState() + " | " + e.getMessage());
        }
    }
}
