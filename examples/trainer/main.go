// Command trainer is a sample trainer written against the PaddlePaddle v2
// master client API, ported to raftmaster by changing only the import path
// and the address option. Several trainers run as goroutines; each reads
// every pass with StartGetRecords/NextRecord and asks for the save-model
// lease after a pass, and one allgather rendezvous shares their addresses
// first.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	master "github.com/raftmaster/raftmaster/client"
)

func main() {
	addrs := flag.String("addrs", "127.0.0.1:8001,127.0.0.1:8002,127.0.0.1:8003", "API addresses of the cluster")
	glob := flag.String("dataset", "data/demo/train-*.recordio", "RecordIO files to train on")
	job := flag.String("job", "", "job to train in (default: the cluster's default job); a job's first dataset is the one it reads")
	trainers := flag.Int("trainers", 3, "number of trainers")
	passes := flag.Int("passes", 2, "passes over the dataset")
	step := flag.Duration("step", 0, "time each record takes to train on (a pause per record, to watch a fail-over mid-pass)")
	flag.Parse()

	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range *trainers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := train(i, strings.Split(*addrs, ","), *job, *glob, *trainers, *passes, *step, &total); err != nil {
				log.Fatalf("trainer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("done: %d trainers read %d records in %d passes in %v\n", *trainers, total.Load(), *passes, time.Since(start).Round(time.Millisecond))
}

func train(id int, addrs []string, job, glob string, peers, passes int, step time.Duration, total *atomic.Int64) error {
	// The client's logger says when it waits for a leader, why a task
	// could not be read, and when the job's dataset was set with other
	// patterns than glob.
	logger := hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("trainer %d", id), Level: hclog.Info, Output: os.Stderr})
	opts := []master.Option{master.WithAddrs(addrs...), master.WithBuffer(100), master.WithLogger(logger)}
	if job != "" {
		opts = append(opts, master.WithJob(job))
	}
	c, err := master.NewClient(opts...)
	if err != nil {
		return err
	}
	defer c.Close()

	// Rendezvous: every trainer learns every trainer's address, in rank order.
	host, _ := os.Hostname()
	w, err := c.Join("demo-rendezvous", uuid.New(), peers, fmt.Sprintf("%s/trainer-%d", host, id), nil, nil)
	if err != nil {
		return err
	}
	res := <-w.C
	if res.Err != nil {
		return res.Err
	}
	if id == 0 {
		fmt.Printf("rendezvous complete: %v\n", res.Data)
	}

	if err := c.SetDataset([]string{glob}); err != nil {
		return err
	}
	for pass := 0; pass < passes; pass++ {
		c.StartGetRecords(pass)
		n := 0
		for {
			_, err := c.NextRecord()
			var chunkErr *master.ChunkError
			if errors.As(err, &chunkErr) {
				// A damaged chunk: its task's records are skipped, the
				// rest of the pass goes on.
				log.Printf("trainer %d: pass %d: skipping a task: %v", id, pass, chunkErr)
				continue
			}
			if err != nil {
				if errors.Is(err, master.ErrPassBefore) || errors.Is(err, master.ErrNoMoreAvailable) {
					break
				}
				return fmt.Errorf("pass %d: %w", pass, err)
			}
			n++
			if step > 0 {
				time.Sleep(step)
			}
			if n%2000 == 0 {
				fmt.Printf("trainer %d: pass %d: %d records\n", id, pass, n)
			}
		}
		total.Add(int64(n))
		fmt.Printf("trainer %d: pass %d finished with %d records\n", id, pass, n)
		ok, err := c.RequestSaveModel(fmt.Sprintf("trainer-%d", id), 2*time.Second)
		if err != nil {
			return err
		}
		if ok {
			fmt.Printf("trainer %d: saves the model after pass %d\n", id, pass)
		}
	}
	return nil
}
