#!/bin/sh
# Prints the version of a build of this tree, which make stamps into the
# binary and tags the image with: the release in VERSION alone on a clean
# checkout of its tag vRELEASE; after it, what git describe says of that
# tag (0.1.0-3-g1a2b3c4, -dirty with uncommitted changes); without the tag,
# the release and the commit (0.1.0-g1a2b3c4); outside a git checkout, the
# release alone.
set -eu
cd "$(dirname "$0")/.."
release=$(cat VERSION)
if described=$(git describe --tags --match "v$release" --dirty 2>/dev/null); then
	echo "${described#v}"
elif commit=$(git describe --always --dirty --exclude '*' 2>/dev/null); then
	echo "$release-g$commit"
else
	echo "$release"
fi
