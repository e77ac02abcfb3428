// Package disk holds no code: its tests prove what a store takes on disk,
// on a real directory.
//
//   - TestDiskUsageIsWhatTheDirectoryHolds: DB.DiskUsage and the
//     metrics' disk figures are what du counts for the store's directory
//     (its write-ahead log's preallocated files included);
//   - TestFeedRetentionKeepsDiskBounded, TestDocumentTTLKeepsDiskBounded:
//     a feed bounded by retention, and documents with a time to live
//     whose ids never come back, keep the directory a small multiple of
//     what they retain however much passes through.
package disk
