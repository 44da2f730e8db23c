// Command board runs the bulletin-board services and their tools. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	_ "time/tzdata" // --hot-article-time-zone works on machines without a zoneinfo database
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "board:", err)
		os.Exit(1)
	}
}
