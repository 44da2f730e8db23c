// Package redisclient is how board talks to Redis: the client it connects with, and what that client's errors
// mean to a caller. Unavailable maps an error from Redis onto the fault vocabulary: a Redis that is down, slow or
// unable to serve for now is a 503 the caller may retry; a reply that says a command or script is wrong is a bug
// (a 500). Test helpers that run a suite against every Redis backend live in redisclienttest.
package redisclient
