package main

import "flag"

// queueCommand waits for the queue package (its Stats, Peek, DeadLetters
// and Requeue).
var queueCommand = &command{
	name:    "queue",
	args:    []string{"DIR", "NAME"},
	summary: "show a queue's state and next messages; list, requeue or discard dead letters",
	help:    `Not implemented yet: it waits for the queue package.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		return func(c *ctx, args []string) int {
			s, code := c.openStore(args[0], false)
			if s == nil {
				return code
			}
			s.close()
			return c.failf(exitFail, "not implemented yet")
		}
	},
}
