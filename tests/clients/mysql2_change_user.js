// Logs in with node's mysql2, switches user with changeUser, and prints one JSON line per step.
const mysql = require('mysql2/promise');

async function whoami(conn) {
  const [rows] = await conn.query('SELECT CURRENT_USER() AS u, DATABASE() AS d');
  return rows[0];
}

async function main() {
  const [port, user1, password1, user2, password2, database] = process.argv.slice(2);
  const conn = await mysql.createConnection({
    host: '127.0.0.1', port: Number(port), user: user1, password: password1, database,
    connectTimeout: 10000,
  });
  console.log(JSON.stringify({ step: 'login', ...(await whoami(conn)) }));
  try {
    await conn.changeUser({ user: user2, password: 'not-' + password2 });
    console.log(JSON.stringify({ step: 'wrong password', error: 'none' }));
  } catch (e) {
    console.log(JSON.stringify({ step: 'wrong password', error: e.errno, message: e.message }));
  }
  // A refused change leaves the connection closed in mysql2; log in again to go on.
  const again = await mysql.createConnection({
    host: '127.0.0.1', port: Number(port), user: user1, password: password1, database,
  });
  await again.changeUser({ user: user2, password: password2 });
  console.log(JSON.stringify({ step: 'changed', ...(await whoami(again)) }));
  await again.end();
  await conn.end().catch(() => {});
}

main().catch((e) => {
  console.log(JSON.stringify({ step: 'failed', error: e.errno ?? null, message: e.message }));
  process.exit(1);
});
