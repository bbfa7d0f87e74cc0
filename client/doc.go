// Package client is the Go client of a raftmaster cluster, for trainers and
// operators. It mirrors the PaddlePaddle v2 Go master client (data
// dispatch) and Determined's allgather package, so trainer code ports by
// changing the import path and the address option.
//
// # Porting guide
//
//	original                                             raftmaster
//	master.NewClient(master.WithAddr(a), ...)            client.NewClient(client.WithAddrs(a1, a2, a3), ...)
//	master.WithEtcd(endpoints, timeout)                  client.WithAddrs(api1, api2, api3): followers redirect
//	master.WithBuffer(n)                                 client.WithBuffer(n)
//	c.SetDataset(globPaths)                              c.SetDataset(globPaths)
//	c.StartGetRecords(passID)                            c.StartGetRecords(passID)
//	c.NextRecord()                                       c.NextRecord()
//	c.RequestSaveModel(trainerID, blockDur)              c.RequestSaveModel(trainerID, blockDur)
//	master.ErrPassBefore, ErrPassAfter, ...              client.ErrPassBefore, client.ErrPassAfter, ...
//	allgather.Join(group, id, n, data, ready, timeout)   c.Join(group, id, n, data, ready, timeout) (also returns an error)
//	allgather.Leave(group, id)                           c.Leave(group, id)
//	allgather.ErrClosed, ErrReconnected, ...             client.ErrClosed, client.ErrReconnected, ...
//	allgather.DefaultTimeout                             client.DefaultTimeout
//	(hard deadline: none in the seed)                    c.JoinWithDeadline(group, id, n, data, ready, timeout, deadline)
//	(no context in the original)                            c.GetTaskContext(ctx, pass), c.JoinContext(ctx, group, id, n, data, opts), ...
//
// # Allgather timeouts
//
// Join and JoinWithTimeout(group, id, numPeers, data, ready, timeout,
// groupTimeout) keep the original's timeout: when the group has not filled up
// groupTimeout (DefaultTimeout by default) after it was created, every
// member's timeout callback is called once with ErrAllGatherTimeoutExceeded,
// and the group stays open. When the last member joins, however late,
// ready is called and every Watcher receives the data, as in the original,
// whose error text gives the reason: on Kubernetes some pods are scheduled
// late. The group lives in the replicated state, so "late" is measured by
// the cluster from the group's creation, the same for every member and
// across fail-overs. A group that stays overdue with no new member for
// fsm.AbandonedGroupTimeout (a day) is dropped, and its Watchers receive
// ErrClosed.
//
// JoinWithDeadline(group, id, numPeers, data, ready, timeout, deadline) is
// the explicit alternative: a group not complete deadline after it was
// created fails for every member. Each one's timeout callback is called
// with ErrAllGatherTimeoutExceeded and its Watcher receives that error; a
// join after that starts the group afresh. The join that creates a group
// chooses its timeout and its kind; later joins keep them.
//
// JoinContext(ctx, group, id, numPeers, data, opts) does all three, its
// settings named in a JoinOptions: OnReady and OnTimeout, the callbacks;
// Timeout, the group's timeout; and FailOnTimeout, which makes it a hard
// deadline. The zero JoinOptions is Join's.
//
// Errors that crossed the wire are *rpc.Error values whose Unwrap returns
// the sentinel, so compare with errors.Is rather than by message. Allgather
// results carry the bare sentinel. Allgather data travels as JSON: Result.Data
// holds each member's data decoded into an any (numbers become float64),
// and Result.Raw the JSON itself. A member of a large group that needs
// few of the values, or decodes them into its own types, joins with
// JoinOptions.RawResults: its Result carries Raw alone, cut from the
// answer without decoding, and Data is nil.
//
// # Rendezvous store
//
// KVGet and KVCompareAndSet read and compare-and-set the keys of the job's
// register, the store a torchrun RendezvousBackend needs: get_state is
// KVGet (Found false: None; else the value and its version as the fencing
// token), set_state(state, token) is KVCompareAndSet with the token as the
// version (0 when there is none), whose result carries the key afterwards
// and whether it swapped. Reads are linearizable and a compare-and-set is
// applied at most once, across fail-overs.
//
// The calls of a c10d Store are native from protocol level 5, each one
// log entry applied at most once: KVDelete and KVDeletePrefix (delete_key,
// and a finished round's keys), KVAdd (add), KVMultiSet (multi_set),
// KVAppend (append) and KVCompareValue (compare_set, by value). KVMultiGet
// (multi_get) and KVNumKeys (num_keys) are linearizable reads, not log
// entries. KVWatch waits, as a long poll at the leader, for a key to
// change: the store's get and wait, without polling.
//
// # Records
//
// StartGetRecords(pass) starts a goroutine that leases the pass's tasks one
// at a time, reads their RecordIO chunks and puts each record into a
// channel that NextRecord drains. While it holds a task it renews the lease
// every third of its length, so a slow trainer keeps its task however long
// it takes, and a trainer that dies gives its task back within one task
// timeout (a minute by default). A record is consumed once NextRecord has
// returned it, and a task is reported finished once all its records are
// consumed, not when they are in the channel: the reader goes on reading
// the next tasks meanwhile, up to the channel's capacity (WithBuffer). A
// reader whose pass is replaced, stopped or closed hands back the tasks
// not all consumed, so that their records are read again, and finishes
// the others. The finish of a task rides the reader's next GetTask when
// that comes soon after (GetTaskAfter: one write finishes the task and
// leases the next, and the pass's last finish rides the GetTask answered
// ErrPassBefore), so that reading costs one write per task; otherwise,
// and while the cluster is below protocol level 9, it goes on its own
// (TaskFinished). When the pass has nothing left for this trainer, NextRecord returns ErrNoMoreAvailable (others still hold tasks),
// ErrPassBefore (the pass is over) or ErrAllTaskFailed. A trainer that asks
// for a pass that has not started yet waits until the others finish the
// current one, and meanwhile takes over the tasks of that pass that come
// back, so that a pass never stalls on a dead trainer. An answer that
// asking again would not change (ErrInvalid, ErrUnknownTask, ...) also ends
// the pass; a cluster that cannot be reached or has no leader is waited
// for, and so is a job without a dataset. Once the client has seen its job
// with a dataset, the deletion of that job ends the pass, and every later
// one, with ErrUnknownJob, even if a job of the same name is created again:
// the job's number, which GetTask answers carry and the client names in its
// next GetTask, tells the two apart.
//
// A task's records are delivered all or nothing: every chunk is read and
// verified, into memory, before the first record is. When a chunk cannot
// be read the task is reported failed (the cluster dispatches it again,
// and sets it aside after failureMax failures), none of its records are
// delivered, and NextRecord returns a *ChunkError naming the file and the
// chunk's offset; the next NextRecord goes on with the next records, so
// log it and carry on:
//
//	var ce *client.ChunkError
//	if errors.As(err, &ce) {
//		log.Printf("skipping damaged data: %v", ce)
//		continue
//	}
//
// Damaged data (errors.Is(err, recordio.ErrCorrupt)) is shown once per task
// and pass: when the same task comes back to this client in that pass and
// is still damaged, it is failed again without another error. An error
// that may be passing, such as a file that cannot be opened, is shown each
// time.
//
// A new StartGetRecords discards the records of the earlier pass that are
// still buffered, and a NextRecord waiting at that moment goes on with the
// new pass. It does not wait for the earlier reader: that one hands back
// the tasks not all consumed, or finishes reporting them, in the
// background, and Close waits for it.
//
// # Weighted mixtures
//
// A dataset set with DatasetParams.Sources (protocol level 9) is a
// mixture: each Source is a set of patterns with a weight, and the
// records handed out follow the weights, counted in records rather than
// tasks, whatever the number of trainers: sources of weight 0.7 and 0.3
// give about 7 records of the first for every 3 of the second, whatever
// the size of each. Each task holds one source's records, and Task.Source
// names it. Every source is read through at its own pace, its own passes,
// and the job's pass is the least of them: a pass of the mixture ends when
// every source has been read through once more.
//
//	_, err := c.SetDatasetWithParams(nil, client.DatasetParams{Sources: []client.Source{
//		{Name: "web", Weight: 0.7, Patterns: []string{"/data/web/*.recordio"}},
//		{Name: "code", Weight: 0.3, Patterns: []string{"/data/code/*.recordio"}},
//	}})
//
// SetWeights changes the weights from the next task handed out, for every
// trainer at once; the shares count afresh from the change, and the past
// is not paid back. SetWeightSchedule sets the weights to come, each step
// keyed by the job's records consumed (the records of its finished tasks,
// in every pass), and nil clears it. Job describes each source (its
// weight, pass, queues, records and finished tasks) and the steps not yet
// reached.
//
// # Transport
//
// Every write carries a request id, the client's random id and a sequence
// number, and every retry of that write reuses it, so the cluster applies
// it once: a retried GetTask returns the same task. A follower redirects to
// the leader, whose address the client remembers. Connection errors and
// 503 answers (no leader, unknown outcome) make the client move to the next
// address and retry with exponential backoff and full jitter, for up to
// WithRetry's budget; other errors are returned at once.
//
// The cluster remembers an identity's outcomes for rpc.DedupWindow (30
// minutes) after its last request, and a write sends no attempt later than
// rpc.MaxWriteRetry (15 minutes) after its first: with DefaultRetry, the
// last attempt starts within 2 minutes and the call ends within about 2
// minutes and 5 seconds (an attempt waits 5 seconds at most; SetDataset's
// waits up to the budget, so it ends within 4 minutes). Each write in
// flight has its own identity, one of the Client's lanes, so a Client
// holds as many identities as it has writes in flight at once. A lane
// left idle past the window meets ErrUnknownClient on its next write's
// first attempt, which applied nothing: the client then takes a new
// identity and sends the write again as its first. A retry refused so
// returns ErrUnknownClient, since an earlier attempt may have applied.
// When the cluster has no room for a new identity it answers 503
// too_many_clients, which is retried like a missing leader.
//
// # Contexts
//
// Every call that talks to the cluster takes a context.Context, as the
// calls of database/sql do: first among its parameters (Health, BackupTo,
// Call, KVGet, KVCompareAndSet, SetWeights), or in a form named with the suffix
// Context beside the original's name (GetTaskContext beside GetTask,
// JoinContext beside the three joins). The original names keep their
// signatures and call their Context form with context.Background().
//
// A context cancelled, or whose deadline passes, ends the call at once,
// in an attempt or in the backoff between two, however much of the retry
// budget is left: the error names the call and the last failure, and
// errors.Is matches it with context.Canceled or context.DeadlineExceeded,
// and with the cause given to context.WithCancelCause. A call whose
// context is done before it starts sends nothing. A write ended so may or
// may not have been applied: calling again sends a new write, with a new
// request id. Close ends every call too, with ErrClientClosed.
//
// The context of a call that starts work in the background bounds that
// work as well. When JoinContext's ends before the group's outcome, its
// Watcher receives the context's error and no callback is called; the
// member stays in the group (Leave takes it out). When
// StartGetRecordsContext's ends, the reader hands back the task it was in
// the middle of, and NextRecord returns the context's error until the next
// StartGetRecords. NextRecordContext's bounds one wait for a record: the
// pass goes on for the next call.
//
// # Example
//
//	c, err := client.NewClient(client.WithAddrs("n1:8080", "n2:8080", "n3:8080"), client.WithBuffer(100))
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	if err := c.SetDataset([]string{"/data/train-*.recordio"}); err != nil {
//		return err
//	}
//	for pass := 0; pass < passes; pass++ {
//		c.StartGetRecords(pass)
//		for {
//			rec, err := c.NextRecord()
//			if errors.Is(err, client.ErrPassBefore) || errors.Is(err, client.ErrNoMoreAvailable) {
//				break
//			}
//			var damaged *client.ChunkError
//			if errors.As(err, &damaged) {
//				log.Printf("skipping a damaged task: %v", damaged)
//				continue
//			}
//			if err != nil {
//				return err
//			}
//			train(rec)
//		}
//		if ok, err := c.RequestSaveModel(trainerID, time.Minute); err == nil && ok {
//			save()
//		}
//	}
//	w, err := c.Join("epoch-end", memberID, numTrainers, metrics, nil, nil)
//	if err != nil {
//		return err
//	}
//	res := <-w.C // res.Data[i] is member i's metrics, res.Rank this trainer's index
package client
