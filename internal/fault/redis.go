package fault

import (
	"errors"

	"github.com/redis/go-redis/v9"
)

// FromRedis turns Redis being unreachable, slow or unable to serve (loading, read-only replica, cluster down,
// out of memory...) into an Unavailable error with code and message. Any other reply error means a command or
// script of the caller is wrong, and is returned as it is: an internal error.
func FromRedis(err error, code, message string) error {
	var reply redis.Error
	if errors.As(err, &reply) && !redis.IsLoadingError(err) && !redis.IsReadOnlyError(err) &&
		!redis.IsClusterDownError(err) && !redis.IsTryAgainError(err) && !redis.IsMasterDownError(err) &&
		!redis.IsMaxClientsError(err) && !redis.IsOOMError(err) {
		return err
	}
	return Unavailablef(err, code, "%s", message)
}
