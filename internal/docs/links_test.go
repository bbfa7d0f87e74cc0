package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's top directory, from this package's.
const root = "../.."

// pagePatterns name the Markdown files checked, relative to root.
var pagePatterns = []string{"*.md", "docs/*.md", "docs/*/*.md", "python/*.md"}

// page is one Markdown file: its links and the anchors its headings make.
type page struct {
	path    string          // slash-separated, relative to root
	links   []link          // every link and image outside code
	anchors map[string]bool // GitHub's anchor of each heading
}

// link is one link target and the line it is on.
type link struct {
	line   int
	target string
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	htmlTarget = regexp.MustCompile(`(?:href|src)="([^"]*)"`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// parse reads a page's links and headings, leaving out fenced code blocks
// and code spans, where neither is one.
func parse(rel string, text string) page {
	p := page{path: rel, anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			slug := slugify(m[1])
			if n := seen[slug]; n > 0 {
				p.anchors[slug+"-"+strconv.Itoa(n)] = true
			} else {
				p.anchors[slug] = true
			}
			seen[slug]++
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			p.links = append(p.links, link{i + 1, m[1]})
			continue
		}
		prose := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(prose, -1) {
			p.links = append(p.links, link{i + 1, m[1]})
		}
		for _, m := range htmlTarget.FindAllStringSubmatch(prose, -1) {
			p.links = append(p.links, link{i + 1, m[1]})
		}
	}
	return p
}

// slugify is GitHub's anchor of a heading: the text without its Markdown
// (code ticks, emphasis, link targets), lower case, every character but
// letters, digits, '-', '_' and spaces dropped, spaces made hyphens.
func slugify(title string) string {
	title = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(title, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// loadPages parses every checked page, by its path relative to root.
func loadPages(t *testing.T) map[string]page {
	t.Helper()
	pages := map[string]page{}
	for _, pattern := range pagePatterns {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(root, f)
			if err != nil {
				t.Fatal(err)
			}
			rel = filepath.ToSlash(rel)
			pages[rel] = parse(rel, string(b))
		}
	}
	if _, ok := pages["README.md"]; !ok {
		t.Fatal("README.md not found: is root the repository's top directory?")
	}
	return pages
}

// TestRelativeLinksResolve: every relative link of a page names a file or
// directory of the repository, and its anchor, when it has one and the
// target is a page, a heading of that page.
func TestRelativeLinksResolve(t *testing.T) {
	pages := loadPages(t)
	names := make([]string, 0, len(pages))
	for name := range pages {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, l := range pages[name].links {
			if msg := checkLink(root, pages, name, l.target); msg != "" {
				t.Errorf("%s:%d: link %q: %s", name, l.line, l.target, msg)
			}
		}
	}
}

// checkLink says what is wrong with a link of the page from, in the
// repository at root, or "".
func checkLink(root string, pages map[string]page, from, target string) string {
	if target == "" {
		return "empty target"
	}
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "" // another site's: not checked here
	}
	file, anchor, _ := strings.Cut(target, "#")
	if i := strings.IndexByte(file, '?'); i >= 0 {
		file = file[:i]
	}
	dest := from
	if file != "" {
		if strings.HasPrefix(file, "/") {
			return "absolute path: make it relative to the page"
		}
		dest = path.Clean(path.Join(path.Dir(from), file))
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "points outside the repository"
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
			return "no such file or directory " + dest
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	p, ok := pages[dest]
	if !ok {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dest)))
		if err != nil {
			return err.Error()
		}
		p = parse(dest, string(b))
	}
	if !p.anchors[anchor] {
		return "no heading of " + dest + " makes the anchor #" + anchor
	}
	return ""
}

// TestEveryDocsPageIsLinked: the README links the index of docs/, and the
// index links every page of docs/, so that no page is out of reach from
// the front door.
func TestEveryDocsPageIsLinked(t *testing.T) {
	pages := loadPages(t)
	index, ok := pages["docs/README.md"]
	if !ok {
		t.Fatal("docs/README.md, the index of docs/, is missing")
	}
	if !linksTo(pages["README.md"], "docs/README.md") {
		t.Error("README.md does not link docs/README.md, the index of docs/")
	}
	for name := range pages {
		if path.Dir(name) != "docs" || name == "docs/README.md" {
			continue
		}
		if !linksTo(index, name) {
			t.Errorf("docs/README.md does not link %s", name)
		}
	}
}

// linksTo reports whether p links the page dest, with or without an anchor.
func linksTo(p page, dest string) bool {
	for _, l := range p.links {
		file, _, _ := strings.Cut(l.target, "#")
		if file != "" && !scheme.MatchString(file) && path.Clean(path.Join(path.Dir(p.path), file)) == dest {
			return true
		}
	}
	return false
}

// TestParse: the checker's own reading of a page, so that a link it
// misses cannot pass for a link that resolves.
func TestParse(t *testing.T) {
	text := strings.Join([]string{
		"# raftmaster",
		"## See a fail-over",
		"## The members at a glance: `cluster status`",
		"## Fault tolerance",
		"## Fault tolerance",
		"```sh",
		"# a comment, not a heading: [x](in-code.md)",
		"```",
		"See [ops](docs/operations.md#backup-and-restore) and ![img](docs/a.png).",
		"Not a link: `[x](in-span.md)`; [ref]: not a definition mid-line",
		`<img src="docs/b.png"> [c](https://example.com/x.md)`,
		"[def]: CHANGELOG.md",
	}, "\n")
	p := parse("README.md", text)
	var targets []string
	for _, l := range p.links {
		targets = append(targets, l.target)
	}
	want := []string{"docs/operations.md#backup-and-restore", "docs/a.png", "https://example.com/x.md", "docs/b.png", "CHANGELOG.md"}
	if strings.Join(targets, " ") != strings.Join(want, " ") {
		t.Errorf("links %q, want %q", targets, want)
	}
	for _, a := range []string{"raftmaster", "see-a-fail-over", "the-members-at-a-glance-cluster-status", "fault-tolerance", "fault-tolerance-1"} {
		if !p.anchors[a] {
			t.Errorf("no anchor %q in %v", a, p.anchors)
		}
	}
	if p.anchors["a-comment-not-a-heading-xin-codemd"] || len(p.anchors) != 5 {
		t.Errorf("anchors %v, want the five headings outside code", p.anchors)
	}
}

// TestCheckLink: what the checker refuses, in a repository of three files.
func TestCheckLink(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"README.md":      "# Top\n## Quick start\n",
		"docs/README.md": "# Docs\n",
		"fsm/doc.go":     "package fsm\n",
	}
	pages := map[string]page{}
	for name, text := range files {
		f := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".md") {
			pages[name] = parse(name, text)
		}
	}
	for _, c := range []struct {
		from, target string
		ok           bool
	}{
		{"README.md", "#quick-start", true},
		{"README.md", "#quick-stop", false},
		{"README.md", "docs/README.md#docs", true},
		{"README.md", "docs/README.md#nothing", false},
		{"README.md", "docs/no-such-page.md", false},
		{"README.md", "fsm/doc.go", true},
		{"README.md", "fsm/doc.go#L1", true},
		{"README.md", "fsm", true},
		{"docs/README.md", "../README.md#top", true},
		{"docs/README.md", "README.md#quick-start", false},
		{"docs/README.md", "../../elsewhere.md", false},
		{"README.md", "/README.md", false},
		{"README.md", "https://example.com/missing.md", true},
	} {
		msg := checkLink(dir, pages, c.from, c.target)
		if (msg == "") != c.ok {
			t.Errorf("%s -> %s: %q, want ok=%v", c.from, c.target, msg, c.ok)
		}
	}
}
