package app

import (
	"errors"

	"board/internal/outbox"
	"board/internal/sqldb"
)

// newRelay builds the relay of a producer service's outbox in db, of the kind --relay names.
func newRelay(e *Engines, service string, db *sqldb.DB, metrics *outbox.Metrics) (*outbox.Relay, error) {
	cfg := e.Config
	coord := outbox.NewCoordinator(e.Redis, cfg.RedisPrefix, service, cfg.OutboxShards,
		outbox.CoordinatorConfig{Ping: cfg.CoordinatorPing, DeadAfter: cfg.CoordinatorDeadline}, e.Logger, metrics)
	rc := outbox.RelayConfig{TopicPrefix: cfg.TopicPrefix, PollInterval: cfg.RelayPollInterval, MinAge: cfg.RelayMinAge,
		AckTimeout: cfg.DeliveryTimeout}
	if cfg.Relay != RelayVStream {
		return outbox.NewRelay(db, e.Producer, coord, rc, e.Logger, metrics), nil
	}
	if !db.Vitess() {
		return nil, errors.New("--relay vstream follows Vitess's change stream: --mysql-dsn must name a vtgate")
	}
	if cfg.VTGateGRPCAddr == "" {
		return nil, errors.New("--relay vstream needs --vtgate-grpc-addr, vtgate's gRPC address")
	}
	return outbox.NewVStreamRelay(db, e.Producer, coord, e.Redis, rc, outbox.VStreamConfig{Addr: cfg.VTGateGRPCAddr,
		Keyspace: db.Name, Shards: cfg.OutboxShards,
		PositionKey: cfg.RedisPrefix + "outbox-vstream::" + service + "::position"}, e.Logger, metrics)
}
