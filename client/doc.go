// Package client is the Go client of a raftmaster cluster, for trainers and
// operators. It mirrors the PaddlePaddle v2 Go master client (data
// dispatch) and Determined's allgather package, so trainer code ports by
// changing the import path and the address option.
//
// # Porting guide
//
//	seed                                                 raftmaster
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
//
// Errors that crossed the wire are *rpc.Error values whose Unwrap returns
// the sentinel, so compare with errors.Is rather than by message. Allgather
// results carry the bare sentinel. Allgather data travels as JSON: Result.Data
// holds each member's data decoded into an any (numbers become float64),
// and Result.Raw the JSON itself.
//
// # Records
//
// StartGetRecords(pass) starts a goroutine that leases the pass's tasks one
// at a time, reads their RecordIO chunks and puts each record into a
// channel that NextRecord drains. A task is reported finished when its last
// record is in the channel, and failed when a chunk cannot be read, so a
// record may be seen again after a failure. When the pass has nothing left
// for this trainer, NextRecord returns ErrNoMoreAvailable (others still
// hold tasks), ErrPassBefore (the pass is over) or ErrAllTaskFailed. A
// trainer that asks for a pass that has not started yet waits until the
// others finish the current one.
//
// # Transport
//
// Every write carries a request id, the client's random id and a sequence
// number, and every retry of that write reuses it, so the cluster applies
// it once: a retried GetTask returns the same task. A follower redirects to
// the leader, whose address the client remembers. Connection errors and
// 503 answers (no leader, unknown outcome) make the client move to the next
// address and retry with exponential backoff and full jitter, for up to
// WithRetry's budget; other errors are returned at once. Methods without a
// context use one that Close cancels.
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
