package v1

// Hub marks v1, the storage version, as the version every other version of
// MaintenanceWindow converts to and from (controller-runtime's
// conversion.Hub).
func (*MaintenanceWindow) Hub() {}
