// Command vttestserver is Vitess's vttestserver with query servers sized for board. Upstream gives each tablet 4
// transactions at once (vttest.QueryServerArgs) and lets a transaction wait 300 s for one. A vtgate that writes a
// consistent lookup vindex holds a transaction on the row's shard while it opens another, on the lookup row's shard:
// 4 concurrent inserts on one shard took all 4 and waited for each other until the transaction timeout. A tablet
// needs twice as many transactions as the writers that can reach its shard at once (board's --mysql-max-conns per
// instance): 100 here, for the tests' pools of 50, and a wait of 5 s at most.
package main

import (
	"fmt"
	"os"

	"vitess.io/vitess/go/cmd/vttestserver/cli"
	"vitess.io/vitess/go/vt/log"
	"vitess.io/vitess/go/vt/utils"
	"vitess.io/vitess/go/vt/vttest"
)

func main() {
	vttest.QueryServerArgs = []string{
		"--queryserver-config-pool-size", "8",
		"--queryserver-config-query-timeout", "300s",
		"--queryserver-config-schema-reload-time", "60s",
		"--queryserver-config-stream-pool-size", "4",
		"--queryserver-config-transaction-cap", "100",
		"--queryserver-config-txpool-timeout", "5s",
	}
	cmd := cli.New()
	cmd.SetGlobalNormalizationFunc(utils.NormalizeUnderscoresToDashes)
	if err := cmd.Execute(); err != nil {
		log.Error(fmt.Sprint(err))
		os.Exit(1)
	}
}
