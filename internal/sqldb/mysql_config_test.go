package sqldb

import (
	"testing"
	"time"
)

func TestMySQLTimeoutsDefaultUnlessTheDSNSetsThem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dsn                 string
		dial, read, written time.Duration
	}{
		{"root@tcp(127.0.0.1:3306)/board", DefaultMySQLDialTimeout, DefaultMySQLReadTimeout, DefaultMySQLWriteTimeout},
		{"root@tcp(127.0.0.1:3306)/board?timeout=1s&readTimeout=2s&writeTimeout=3s", time.Second, 2 * time.Second, 3 * time.Second},
		{"root@tcp(127.0.0.1:3306)/board?readTimeout=2s", DefaultMySQLDialTimeout, 2 * time.Second, DefaultMySQLWriteTimeout},
	} {
		cfg, err := mysqlConfig(tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Timeout != tc.dial || cfg.ReadTimeout != tc.read || cfg.WriteTimeout != tc.written {
			t.Errorf("%s: timeouts dial %v, read %v, write %v; want %v, %v, %v", tc.dsn,
				cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout, tc.dial, tc.read, tc.written)
		}
	}
}
