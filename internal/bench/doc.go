// Package bench holds the commands that measure a board and fill it for experiments: `board bench ...`, which print
// their figures next to a floor measured in the same run, and `board seed`, which bulk-loads articles and comments.
// They build on the composition root (internal/app) for flags and engines, and reach the stores through small
// interfaces for bulk loading.
package bench
