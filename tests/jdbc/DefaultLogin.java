// Logs in through whichever JDBC driver is on the classpath, with the URL as given (its
// options, or none for the driver's defaults); prints who the server says we are, or the error.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

public class DefaultLogin {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2]);
             Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT CURRENT_USER(), DATABASE()")) {
            rs.next();
            System.out.println("user | " + rs.getString(1) + " | " + rs.getString(2));
        } catch (SQLException e) {
            System.out.println("error | " + e.getErrorCode() + " | " + e.getSQLState() + " | " + e.getMessage());
        }
    }
}
