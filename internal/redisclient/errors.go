package redisclient

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"board/internal/fault"
)

// Unavailable turns Redis being unreachable, slow or unable to serve into a fault.Unavailable error with code and
// message, err as its cause. Any other reply error (a wrong type, a script error) means a command or script of the
// caller is wrong, and is returned as it is: an internal error.
func Unavailable(err error, code, message string) error {
	var reply redis.Error
	var nearReply *rueidis.RedisError // the near cache's client's
	if (errors.As(err, &reply) || errors.As(err, &nearReply)) && !redisCannotServe(err) {
		return err
	}
	return fault.Unavailablef(err, code, "%s", message)
}

// redisCannotServe reports the replies of a Redis that is up but cannot serve for now: loading its data, a
// read-only replica, a cluster that is down or resharding, too many clients, out of memory, too few replicas for
// min-replicas-to-write, a failing snapshot that stops writes (MISCONF), or a long script (BUSY). A MOVED or ASK
// that reaches the caller is the cluster's slot map in flux during a failover: the client follows redirects itself
// and gives up only when the nodes keep sending it around.
func redisCannotServe(err error) bool {
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask || redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err) ||
		redis.IsOOMError(err) || redis.IsNoReplicasError(err) ||
		strings.HasPrefix(err.Error(), "MISCONF ") || strings.HasPrefix(err.Error(), "BUSY ") ||
		strings.Contains(err.Error(), "max number of clients reached") // without its ERR from rueidis
}
