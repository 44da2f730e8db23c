package main

import (
	"cmp"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"board/internal/polltest"
)

// Vitess with external tablets over Galera (issue 37, 4b; docs/sharding.md, "External tablets over Galera"): the
// Galera cluster of TestGaleraFailover (scripts/galera, HAProxy on galeraPort), and in front of it etcd, vtctld,
// vtgate and, for each of board's keyspaces, one unmanaged vttablet (--unmanaged --db-host HAProxy) whose database is
// on the cluster under the keyspace's own name. Each keyspace is in one shard "-", sharded but for media. board runs on vtgate
// under the Galera suite's load, and the node HAProxy sends everything to gets SIGKILL: no acknowledged write lost,
// no answer but 503 (or a 409 for a copy in progress). HAProxy, not Vitess, moves the tablets' connections to
// another node; no tablet changes. It uses Vitess's binaries of BOARD_TEST_VITESS_BUILD_DIR (scripts/vitess build).
const (
	vitessGaleraEnv  = "BOARD_TEST_VITESS_GALERA" // 1 runs TestVitessGaleraFailover
	vitessGaleraPort = 18306                      // vtgate's MySQL port; the rest of Vitess takes ports above it
)

// vitessGaleraKeyspaces are the databases of board's services, each a keyspace here.
var vitessGaleraKeyspaces = []string{"article", "comment", "article_like", "article_view", "user", "moderation", "notification", "media"}

func TestVitessGaleraFailover(t *testing.T) {
	if os.Getenv(vitessGaleraEnv) != "1" {
		t.Skipf("set %s=1 to run board through Vitess's external tablets over Galera (it starts scripts/galera and "+
			"Vitess from %s's binaries)", vitessGaleraEnv, vitessBuildDirEnv)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(cmp.Or(os.Getenv(vitessBuildDirEnv), filepath.Join(repo, "board-data", "vitess")), "bin")
	for _, b := range []string{"vtctld", "vtctldclient", "vtgate", "vttablet"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%v: build Vitess first (scripts/vitess build --build-dir DIR, then %s=DIR)", err, vitessBuildDirEnv)
		}
	}
	haproxy := startGalera(t)
	started := time.Now()
	vtgate := startExternalVitess(t, bin, haproxy)
	t.Logf("vtgate serves %d external tablets on %s after %v", len(vitessGaleraKeyspaces), vtgate,
		time.Since(started).Round(time.Second))
	t.Run("kill -9 of the writing node", func(t *testing.T) { galeraKillThrough(t, haproxy, "root@tcp("+vtgate+")/") })
}

// externalVitess runs Vitess's processes, each in a process group of its own, as the mysql user when the test runs
// as root (Vitess refuses root).
type externalVitess struct {
	t    *testing.T
	dir  string
	bin  string
	cred *syscall.Credential
}

// startExternalVitess starts etcd, vtctld, a tablet per keyspace on HAProxy's address, and vtgate; it returns
// vtgate's MySQL address once vtgate serves every keyspace's primary. Everything stops when the test ends.
func startExternalVitess(t *testing.T, bin, haproxy string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "board-vitess-galera")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	v := &externalVitess{t: t, dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("mysql")
		if err != nil {
			t.Fatalf("Vitess refuses root and there is no mysql user to run it as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		v.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	// An unmanaged tablet wants its app user's password, from a flag or the credentials file: root has none here.
	creds := filepath.Join(dir, "credentials.json")
	if err := os.WriteFile(creds, []byte(`{"root": [""]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(haproxy, ":")
	const h = "127.0.0.1"
	p := vitessGaleraPort
	topo := []string{"--topo-implementation", "etcd2", "--topo-global-server-address", fmt.Sprintf("%s:%d", h, p+5),
		"--topo-global-root", "/vitess/global"}
	vt := func(program string, args ...string) []string { // a Vitess program's command line, on the topology
		return append(append([]string{filepath.Join(bin, program)}, topo...), args...)
	}

	v.spawn("etcd", "etcd", "--name", "board", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://%s:%d", h, p+5), "--advertise-client-urls", fmt.Sprintf("http://%s:%d", h, p+5),
		"--listen-peer-urls", fmt.Sprintf("http://%s:%d", h, p+6), "--initial-advertise-peer-urls", fmt.Sprintf("http://%s:%d", h, p+6),
		"--initial-cluster", fmt.Sprintf("board=http://%s:%d", h, p+6))
	v.spawn("vtctld", vt("vtctld", "--service-map", "grpc-vtctl,grpc-vtctld",
		"--port", strconv.Itoa(p+3), "--grpc-port", strconv.Itoa(p+4), "--bind-address", h, "--grpc-bind-address", h)...)
	polltest.Until(t, galeraBound, func() (bool, string) {
		out, err := v.ctl("GetCellInfoNames")
		return err == nil, fmt.Sprintf("vtctld does not answer: %v %s", err, out)
	})
	v.mustCtl("AddCellInfo", "--root", "/vitess/local", "--server-address", fmt.Sprintf("%s:%d", h, p+5), "local")

	galera := openGalera(t, "root@tcp("+haproxy+")/")
	for i, ks := range vitessGaleraKeyspaces {
		v.mustCtl("CreateKeyspace", "--durability-policy", "none", ks)
		// media's transactions span its tables' keys: its keyspace is unsharded (docs/sharding.md).
		v.mustCtl("ApplyVSchema", "--vschema", fmt.Sprintf(`{"sharded": %t}`, ks != "media"), ks)
		if _, err := galera.Exec("CREATE DATABASE IF NOT EXISTS `" + ks + "`"); err != nil {
			t.Fatal(err)
		}
		tp := p + 10 + 2*i
		args := vt("vttablet", "--tablet-path", fmt.Sprintf("local-%010d", i+1),
			"--tablet-hostname", h, "--init-keyspace", ks, "--init-shard", "-", "--init-tablet-type", "replica",
			"--init-db-name-override", ks, "--unmanaged", "--db-host", host, "--db-port", port,
			"--db-credentials-file", creds, "--port", strconv.Itoa(tp), "--grpc-port", strconv.Itoa(tp+1),
			"--bind-address", h, "--grpc-bind-address", h,
			"--service-map", "grpc-queryservice,grpc-tabletmanager,grpc-updatestream",
			"--queryserver-config-transaction-cap", "100", "--queryserver-config-txpool-timeout", "5s")
		for _, u := range []string{"app", "dba", "allprivs", "filtered", "repl", "appdebug", "erepl"} {
			args = append(args, "--db-"+u+"-user", "root", "--db-"+u+"-use-ssl=false")
		}
		v.spawn(fmt.Sprintf("vttablet-%d", i+1), args...)
	}
	// A tablet cannot start as PRIMARY: TabletExternallyReparented makes it one, once it has registered.
	for i := range vitessGaleraKeyspaces {
		alias := fmt.Sprintf("local-%010d", i+1)
		polltest.Until(t, galeraBound, func() (bool, string) {
			out, err := v.ctl("TabletExternallyReparented", alias)
			return err == nil, fmt.Sprintf("TabletExternallyReparented %s: %v %s", alias, err, out)
		})
	}
	v.spawn("vtgate", vt("vtgate", "--cell", "local", "--cells-to-watch", "local",
		"--tablet-types-to-wait", "PRIMARY", "--service-map", "grpc-vtgateservice", "--port", strconv.Itoa(p+1),
		"--grpc-port", strconv.Itoa(p+2), "--bind-address", h, "--grpc-bind-address", h,
		"--mysql-server-port", strconv.Itoa(p), "--mysql-server-bind-address", h, "--mysql-auth-server-impl", "none",
		"--transaction-mode", "SINGLE", "--vschema-ddl-authorized-users", "%", "--enable-buffer",
		"--buffer-window", "10s", "--buffer-max-failover-duration", "20s")...)
	addr := fmt.Sprintf("%s:%d", h, p)
	gate, err := sql.Open("mysql", "root@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Close() })
	polltest.Until(t, galeraBound, func() (bool, string) {
		rows, err := gate.Query("SHOW VITESS_TABLETS")
		if err != nil {
			return false, err.Error()
		}
		defer rows.Close()
		serving := 0
		for rows.Next() {
			var cell, ks, shard, typ, state, alias, hostname, start string
			if err := rows.Scan(&cell, &ks, &shard, &typ, &state, &alias, &hostname, &start); err != nil {
				return false, err.Error()
			}
			if typ == "PRIMARY" && state == "SERVING" {
				serving++
			}
		}
		return serving == len(vitessGaleraKeyspaces), fmt.Sprintf("vtgate serves %d primaries", serving)
	})
	return addr
}

// spawn starts a process of Vitess in dir, its output in dir/NAME.log, and stops its process group (SIGTERM, then
// SIGKILL) when the test ends.
func (v *externalVitess) spawn(name string, args ...string) {
	v.t.Helper()
	log, err := os.Create(filepath.Join(v.dir, name+".log"))
	if err != nil {
		v.t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = v.dir
	cmd.Env = append(os.Environ(), "HOME="+v.dir, "VTDATAROOT="+v.dir)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: v.cred}
	if err := cmd.Start(); err != nil {
		v.t.Fatalf("%s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	v.t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		log.Close()
	})
}

// ctl runs vtctldclient on the cluster's vtctld.
func (v *externalVitess) ctl(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(v.bin, "vtctldclient"),
		append([]string{"--server", fmt.Sprintf("127.0.0.1:%d", vitessGaleraPort+4)}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: v.cred}
	return cmd.CombinedOutput()
}

func (v *externalVitess) mustCtl(args ...string) {
	v.t.Helper()
	if out, err := v.ctl(args...); err != nil {
		v.t.Fatalf("vtctldclient %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
