// Package dataset turns RecordIO file patterns into the chunk list of a
// dataset. The leader calls it before it proposes SetDataset, so that the
// log entry carries the chunks and followers never touch the files; the
// client may call it too, when the masters cannot see the data volume.
//
// Index expands the patterns (as filepath.Glob does; a plain path matches
// itself), sorts the matches by path and drops duplicates, then reads each
// file's chunk headers with recordio.LoadIndex. Chunks come out in file
// order and, within a file, in offset order. As in the original master, a
// pattern that matches nothing is skipped; it is an error, naming the
// patterns, only when none of them matches a file. A malformed pattern, a
// file that cannot be read and a file that is not valid RecordIO are
// errors that name the pattern or the file; Limits bound the work one
// request can cause.
package dataset
