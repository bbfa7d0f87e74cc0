// Command previoustrainer is a trainer written against the client API of
// the previous release, built inside that release's tree by the
// integration tests, to show that trainers built with it keep working
// against this release's servers. Its trainers meet in an allgather
// rendezvous, set the dataset, read every pass and ask for the save-model
// lease after each; every record is printed as "record PASS RECORD", and
// any failed call ends the program with status 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	master "github.com/raftmaster/raftmaster/client"
)

func main() {
	addrs := flag.String("addrs", "", "API addresses of the cluster, comma-separated")
	job := flag.String("job", "", "the job to use")
	glob := flag.String("dataset", "", "RecordIO files to train on")
	trainers := flag.Int("trainers", 2, "number of trainers")
	passes := flag.Int("passes", 2, "passes over the dataset")
	flag.Parse()

	var mu sync.Mutex
	emit := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	errs := make(chan error, *trainers)
	for i := range *trainers {
		go func() {
			errs <- train(i, strings.Split(*addrs, ","), *job, *glob, *trainers, *passes, emit)
		}()
	}
	failed := false
	for range *trainers {
		if err := <-errs; err != nil {
			log.Print(err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func train(id int, addrs []string, job, glob string, peers, passes int, emit func(string, ...any)) error {
	c, err := master.NewClient(master.WithAddrs(addrs...), master.WithJob(job), master.WithBuffer(4))
	if err != nil {
		return err
	}
	defer c.Close()

	w, err := c.Join("rendezvous", uuid.New(), peers, fmt.Sprintf("trainer-%d", id), nil, nil)
	if err != nil {
		return fmt.Errorf("trainer %d: join: %w", id, err)
	}
	res := <-w.C
	if res.Err != nil {
		return fmt.Errorf("trainer %d: rendezvous: %w", id, res.Err)
	}
	emit("rendezvous %d %d", id, len(res.Data))

	if _, err := c.SetDatasetWithParams([]string{glob}, master.DatasetParams{ChunksPerTask: 1}); err != nil {
		return fmt.Errorf("trainer %d: set dataset: %w", id, err)
	}
	for pass := range passes {
		c.StartGetRecords(pass)
		for {
			r, err := c.NextRecord()
			if errors.Is(err, master.ErrPassBefore) || errors.Is(err, master.ErrNoMoreAvailable) {
				break
			}
			if err != nil {
				return fmt.Errorf("trainer %d: pass %d: %w", id, pass, err)
			}
			emit("record %d %s", pass, r)
		}
		if _, err := c.RequestSaveModel(fmt.Sprintf("trainer-%d", id), time.Second); err != nil {
			return fmt.Errorf("trainer %d: save model: %w", id, err)
		}
	}
	return nil
}
