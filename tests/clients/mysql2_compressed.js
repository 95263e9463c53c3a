// Runs the compressed-protocol queries with node mysql2 (compress: true, multiple statements);
// prints one line per answer: row count and a checksum of the rows, or the error.
const mysql = require('mysql2/promise');
const crypto = require('crypto');

const QUERIES = [
  "SELECT seq, REPEAT('x', 100) AS x FROM seq_1_to_20000",
  "SELECT 1 AS a; SELECT REPEAT('y', 70000) AS y; SELECT 3 AS c",
  "SELECT no_such_column",
];

async function main() {
  const [port, user, password, database] = process.argv.slice(2);
  const conn = await mysql.createConnection({
    host: '127.0.0.1', port: Number(port), user, password, database,
    compress: true, multipleStatements: true,
  });
  for (const sql of QUERIES) {
    try {
      const [rows] = await conn.query(sql);
      const text = JSON.stringify(rows);
      const sum = crypto.createHash('sha1').update(text).digest('hex').slice(0, 12);
      console.log(`${rows.length} rows | ${sum}`);
    } catch (e) {
      console.log(`error | ${e.errno} | ${e.message}`);
    }
  }
  await conn.end();
}

main().catch((e) => console.log(`failed | ${e.message}`));
