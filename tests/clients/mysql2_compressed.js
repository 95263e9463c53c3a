// Runs queries with node mysql2 (compress: true, multiple statements); prints one line per
// answer: row count (result sets for several) and a checksum of the rows, or the error.
//
// Usage: node mysql2_compressed.js PORT USER PASSWORD DATABASE SQL...
const mysql = require('mysql2/promise');
const crypto = require('crypto');

async function main() {
  const [port, user, password, database, ...queries] = process.argv.slice(2);
  const conn = await mysql.createConnection({
    host: '127.0.0.1', port: Number(port), user, password, database,
    compress: true, multipleStatements: true,
  });
  for (const sql of queries) {
    try {
      const [rows] = await conn.query(sql);
      const hash = crypto.createHash('sha1');
      for (const row of rows) hash.update(JSON.stringify(row));
      console.log(`${rows.length} rows | ${hash.digest('hex').slice(0, 12)}`);
    } catch (e) {
      console.log(`error | ${e.errno} | ${e.message}`);
    }
  }
  await conn.end();
}

main().catch((e) => console.log(`failed | ${e.message}`));
