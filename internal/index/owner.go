package index

// OwnerUID is the index the host keeps on every owned kind: the UID of an
// object's controller owner. A List of an owned kind in a namespace with the
// field selector "<OwnerUID>=<uid>" returns, from the cache, the objects
// whose controller owner has that UID. A declared index may not take its
// name.
const OwnerUID = ".metadata.controllerUID"
