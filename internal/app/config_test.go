package app

import (
	"bytes"
	"slices"
	"testing"

	"board/internal/user"
)

func TestEnvironmentConfiguresFlags(t *testing.T) {
	env := map[string]string{"BOARD_DATA_DIR": "/from/env", "BOARD_ARTICLE_ADDR": ":1234", "BOARD_MIGRATE": "false"}
	cfg, err := ParseServe([]string{"--article-addr", ":5678"}, func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/from/env" || cfg.ArticleAddr != ":5678" || cfg.Migrate {
		t.Errorf("got data dir %q, article addr %q, migrate %v; want the env's dir, the flag's addr, no migrate",
			cfg.DataDir, cfg.ArticleAddr, cfg.Migrate)
	}
	env["BOARD_MIGRATE"] = "maybe"
	if _, err := ParseServe(nil, func(k string) string { return env[k] }, &bytes.Buffer{}); err == nil {
		t.Error("a bad BOARD_MIGRATE value was accepted")
	}
}

// The README's distributed example puts flags after the service names.
func TestServeTakesFlagsAndServicesInAnyOrder(t *testing.T) {
	cfg, err := ParseServe([]string{"article", "--article-addr", ":9100", "view", "--like-addr=:1", "comment"},
		func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"article", "view", "comment"}; !slices.Equal(cfg.Services, want) {
		t.Errorf("services %q, want %q", cfg.Services, want)
	}
	if cfg.ArticleAddr != ":9100" || cfg.LikeAddr != ":1" {
		t.Errorf("article addr %q, like addr %q; want :9100 and :1", cfg.ArticleAddr, cfg.LikeAddr)
	}
	cfg = Default()
	fs := NewFlagSet("test", "Usage", &bytes.Buffer{})
	cfg.ServeFlags(fs)
	operands, err := ParseWithOperands(fs, []string{"article", "--", "--not-a-flag"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"article", "--not-a-flag"}; !slices.Equal(operands, want) {
		t.Errorf("operands %q, want %q", operands, want)
	}
}

// The defaults are the flags' defaults, and an unconfigured serve runs every service.
func TestDefaultsAreTheFlagsDefaults(t *testing.T) {
	cfg, err := ParseServe(nil, func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Services, ServiceNames()) || cfg.ArticleAddr != ":9000" || cfg.OutboxShards != 4 ||
		cfg.Limits["sign-in"].Rate != 10 || cfg.Limits[user.OIDCLimit].Rate != 30 || cfg.LogFormat != "text" {
		t.Errorf("defaults: %+v", cfg)
	}
}

// The configuration logged at start shows no password.
func TestConfigLogValueMasksSecrets(t *testing.T) {
	cfg := Default()
	cfg.RedisPassword = "redis-secret"
	cfg.SMTP.Password = "smtp-secret"
	cfg.MySQLDSN = "board:db-secret@tcp(db:3306)/"
	cfg.Origins = map[string]string{"article": "http://reader:origin-secret@10.0.0.5:9000"}
	var out bytes.Buffer
	cfg.NewLogger(&out).Info("starting", "config", cfg)
	logged := out.String()
	for _, secret := range []string{"redis-secret", "db-secret", "origin-secret", "smtp-secret"} {
		if bytes.Contains(out.Bytes(), []byte(secret)) {
			t.Errorf("the logged configuration shows %q: %s", secret, logged)
		}
	}
	for _, want := range []string{"config.mysql_dsn=", "config.redis_password=***", "config.outbox_shards=4", "tcp(db:3306)",
		"config.vtgate_grpc_addr="} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("the logged configuration lacks %q: %s", want, logged)
		}
	}
}

// --oidc-provider repeats; a secret may come from the environment, the redirect URL defaults to the web's callback
// under --public-url, and the logged configuration shows no secret.
func TestOIDCProviderFlags(t *testing.T) {
	env := map[string]string{"BOARD_OIDC_CORP_ID_CLIENT_SECRET": "env-secret"}
	cfg, err := ParseServe([]string{"--public-url", "https://board.example.com/",
		"--oidc-provider", "name=corp-id,issuer=https://id.example.com,client-id=board",
		"--oidc-provider", "name=other,issuer=https://other.example.com/,client-id=b,client-secret=flag-secret,redirect-url=https://x.example.com/cb"},
		func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.OIDCProviders) != 2 {
		t.Fatalf("providers %v", cfg.OIDCProviders)
	}
	corp, other := cfg.OIDCProviders[0], cfg.OIDCProviders[1]
	if corp.ClientSecret != "env-secret" || corp.RedirectURL != "https://board.example.com/oidc/corp-id/callback" {
		t.Errorf("corp-id: %+v", corp)
	}
	if other.ClientSecret != "flag-secret" || other.RedirectURL != "https://x.example.com/cb" {
		t.Errorf("other: %+v", other)
	}
	var out bytes.Buffer
	cfg.NewLogger(&out).Info("starting", "config", cfg)
	if bytes.Contains(out.Bytes(), []byte("secret")) || !bytes.Contains(out.Bytes(), []byte("name=corp-id")) {
		t.Errorf("the logged configuration: %s", out.String())
	}
	if _, err := ParseServe([]string{"--oidc-provider", "name=x"}, func(string) string { return "" }, &bytes.Buffer{}); err == nil {
		t.Error("a provider without issuer and client id was accepted")
	}
}
