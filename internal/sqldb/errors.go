package sqldb

import (
	"errors"
	"strings"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// IsDuplicate reports whether err is a write rejected because its row would repeat a primary or unique key: the
// answer to "this exists already" that callers turn into a conflict rather than an internal error.
func IsDuplicate(err error) bool {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1062 // ER_DUP_ENTRY
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		return lite.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || lite.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// IsStaleRead reports whether err is a write MariaDB refused because another transaction changed the row after
// this one's snapshot was taken (error 1020, "Record has changed since last read"). MariaDB raises it under
// innodb_snapshot_isolation, on by default from 11.8, where older servers and MySQL let the write see the newer
// row. Callers that compare a version they read can treat it as that comparison failing. SQLite never raises it:
// its write transactions are serialized from BEGIN.
func IsStaleRead(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == 1020 // ER_CHECKREAD
}

// galeraNotReady reports a Galera node that refuses work because it is not part of the cluster's primary component
// (cut off from the others, or still joining): error 1047 with a message that names WSREP, where 1047 otherwise
// means a command the server does not know. Nothing the node refused took effect, and another node, or this one
// once it rejoins, takes the work: the database is unavailable for now, not broken. A Galera node's other refusal,
// a certification conflict with a write set from another node, is the deadlock error 1213, which Transact retries.
func galeraNotReady(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == 1047 && strings.Contains(my.Message, "WSREP") // ER_UNKNOWN_COM_ERROR
}
