// Package replication holds the model-based test of the whole replication
// path (issue 26), and nothing else: random schedules of writes of every
// type, from two palaces sharing one device id and token, through their
// outboxes, flushers running as separate processes (this test binary,
// re-executed), a gateway with its op-id ledger (a process too), a proxy
// that slows answers near the timeout and loses answers after the primary
// applied them, to a primary (the MemPalace double, or real MemPalace);
// with refusals, SIGKILLed flushers and a SIGKILLed gateway. At the end
// the primary must hold exactly what the model says: no write lost, none
// twice, facts closed in order, and every op done but those the primary
// refused (and nothing that shared no object with them waits).
//
// Seeds are printed and replayable: go test ./replication -run
// 'TestModel/seed=42' (the interleaving of processes is the machine's, so
// a replay repeats the schedule and the faults, not every race).
// REPLICATION_SEEDS=n runs n seeds (the benchmark run).
package replication
