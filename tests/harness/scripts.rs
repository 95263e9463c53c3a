//! SQL scripts shared by the fidelity tests (direct vs tunnel, with and without nginx).

/// Every column type, NULLs, empty strings, utf8mb4, and all 256 byte values in a BLOB.
pub const TYPES_SCRIPT: &[&str] = &[
    "DROP TABLE IF EXISTS all_types",
    "CREATE TABLE all_types (
        id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        c_empty VARCHAR(10) NOT NULL DEFAULT '',
        c_tiny TINYINT, c_small SMALLINT UNSIGNED, c_medium MEDIUMINT, c_big BIGINT UNSIGNED,
        c_float FLOAT, c_double DOUBLE, c_decimal DECIMAL(20,6),
        c_date DATE, c_time TIME(3), c_datetime DATETIME(6), c_ts TIMESTAMP NULL, c_year YEAR,
        c_char CHAR(5), c_varchar VARCHAR(200) CHARACTER SET utf8mb4, c_binary BINARY(4), c_varbinary VARBINARY(16),
        c_text TEXT, c_blob BLOB, c_mediumblob MEDIUMBLOB, c_longtext LONGTEXT,
        c_enum ENUM('a','b'), c_set SET('x','y'), c_bit BIT(10), c_json JSON,
        c_geom POINT NULL, c_latin VARCHAR(10) CHARACTER SET latin1, KEY (c_tiny)
    )",
    "INSERT INTO all_types (c_empty, c_tiny, c_small, c_medium, c_big, c_float, c_double, c_decimal, c_date, c_time,
        c_datetime, c_ts, c_year, c_char, c_varchar, c_binary, c_varbinary, c_text, c_blob, c_mediumblob, c_longtext,
        c_enum, c_set, c_bit, c_json, c_geom, c_latin) VALUES
     ('', -128, 65535, -8388608, 18446744073709551615, 1.5, -2.25e100, -12345678901234.123456, '2024-02-29', '-838:59:59.000',
      '2024-12-31 23:59:59.999999', '2024-01-01 00:00:01', 2155, 'ab', 'héllo wörld 😀 日本', x'00ff0102', x'', 'text', x'00', x'ff', REPEAT('long', 1000),
      'b', 'x,y', b'1010101010', '{\"k\": [1, 2, null]}', POINT(1, 2), 'café'),
     ('', NULL, NULL, NULL, NULL, NULL, NULL, NULL, '0000-00-00', '00:00:00', '0000-00-00 00:00:00', NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "UPDATE all_types SET c_blob = (SELECT CAST(GROUP_CONCAT(CHAR(seq USING binary) ORDER BY seq SEPARATOR '') AS BINARY) FROM seq_0_to_255) WHERE id = 1",
    "SELECT * FROM all_types ORDER BY id",
    "SELECT c_empty, id FROM all_types",
    "SELECT '', NULL, 0, '' AS e, -0.0, 1e308, CAST(1 AS DECIMAL(65,30)), X'00', _utf8mb4'🙂', _latin1 x'e9'",
    "SELECT LENGTH(c_blob), MD5(c_blob), HEX(c_blob) FROM all_types WHERE id = 1",
    "SELECT t1.id AS alias_id, t2.c_varchar FROM all_types t1 JOIN all_types t2 ON t1.id = t2.id",
    "SELECT COUNT(*), SUM(c_tiny), MAX(c_datetime), GROUP_CONCAT(c_set) FROM all_types",
    "SELECT * FROM all_types WHERE 1 = 0",
    "SHOW COLUMNS FROM all_types",
    "SELECT * FROM information_schema.COLUMNS WHERE TABLE_NAME = 'all_types' ORDER BY ORDINAL_POSITION",
    "DROP TABLE all_types",
];

/// DML with every OK-packet field: affected rows, last insert id, warnings, info.
pub const DML_SCRIPT: &[&str] = &[
    "DROP TABLE IF EXISTS dml",
    "CREATE TABLE dml (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(3), n INT NOT NULL DEFAULT 0)",
    "INSERT INTO dml (v) VALUES ('a'), ('b'), ('c')",
    "INSERT INTO dml (v) VALUES ('d')",
    "UPDATE dml SET n = n + 1 WHERE id <= 2",
    "UPDATE dml SET n = 1 WHERE id = 1",
    "SET sql_mode = ''",
    "INSERT INTO dml (v) VALUES ('toolong'), ('x')",
    "SHOW WARNINGS",
    "INSERT INTO dml (id, v) VALUES (1, 'z') ON DUPLICATE KEY UPDATE v = 'z'",
    "REPLACE INTO dml (id, v) VALUES (2, 'r')",
    "DELETE FROM dml WHERE id > 4",
    "ALTER TABLE dml ADD COLUMN extra INT",
    "SELECT LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS()",
    "SET @u = 5",
    "SELECT @u, @@autocommit, @@sql_mode",
    "SELECT * FROM dml ORDER BY id",
    "SELECT 1 FROM dml FOR UPDATE",
    "DROP TABLE dml",
];

/// Errors that must arrive with the server's own code, SQLSTATE and message.
pub const ERROR_SCRIPT: &[&str] = &[
    "SELEC 1",
    "SELECT * FROM no_such_table",
    "SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 3100, MESSAGE_TEXT = 'custom failure ü'",
    "SELECT 1 FROM DUAL WHERE (SELECT 1 UNION SELECT 2) = 1",
    "USE no_such_database",
    "SELECT 'still fine after errors'",
];
