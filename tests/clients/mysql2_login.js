// Logs in with node mysql2's default settings; prints who the server says we are, or the error.
const mysql = require('mysql2/promise');

async function main() {
  const [port, user, password, database] = process.argv.slice(2);
  try {
    const conn = await mysql.createConnection({ host: '127.0.0.1', port: Number(port), user, password, database });
    const [rows] = await conn.query('SELECT CURRENT_USER() AS u, DATABASE() AS d');
    console.log(`user | ${rows[0].u} | ${rows[0].d}`);
    await conn.end();
  } catch (e) {
    console.log(`error | ${e.errno} | ${e.sqlState} | ${e.message}`);
  }
}

main();
