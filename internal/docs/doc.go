// Package docs holds the checks of the repository's Markdown
// documentation: the README, CONTRIBUTING, the changelog, the Python
// package's README and every page under docs/. Its tests fail on a
// relative link to a file that does not exist, on an anchor that no
// heading of the linked page makes, and on a page of docs/ that neither
// the README nor the index, docs/README.md, links to.
package docs
