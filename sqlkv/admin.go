package sqlkv

import (
	"context"
	"fmt"
)

// Flush implements engine.Admin: every commit is durable when it returns,
// so there is nothing to flush.
func (s *Store) Flush() error {
	if err := s.enter(); err != nil {
		return err
	}
	s.exit()
	return nil
}

// Compact implements engine.Admin: on PostgreSQL, VACUUM (ANALYZE) of the
// whole table (VACUUM has no key range), which makes the space of deleted
// rows reusable and refreshes the planner's statistics. Autovacuum does
// the same in the background (see the table's settings in the README);
// this is for tools and tests. Other dialects compact by themselves.
func (s *Store) Compact(lo, hi []byte) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if s.cfg.Dialect != Postgres {
		return nil
	}
	if _, err := s.pool.Exec(context.Background(), s.q.vacuum); err != nil {
		return fmt.Errorf("sqlkv: vacuum %s: %w", s.cfg.Table, err)
	}
	return nil
}

// Sizes returns the table's size in bytes, its indexes included, and the
// indexes' alone (PostgreSQL and YugabyteDB).
func (s *Store) Sizes() (total, index uint64, err error) {
	if err := s.enter(); err != nil {
		return 0, 0, err
	}
	defer s.exit()
	if s.cfg.Dialect == Cockroach {
		return 0, 0, nil
	}
	var t, i int64
	if err := s.pool.QueryRow(context.Background(), s.q.size).Scan(&t, &i); err != nil {
		return 0, 0, fmt.Errorf("sqlkv: size of %s: %w", s.cfg.Table, err)
	}
	return uint64(t), uint64(i), nil
}

// DiskUsage implements engine.Admin: the table's size, indexes included
// (0 on CockroachDB, which does not say).
func (s *Store) DiskUsage() (uint64, error) {
	t, _, err := s.Sizes()
	return t, err
}

// Metrics implements engine.Admin: one status line.
func (s *Store) Metrics() (string, error) {
	t, i, err := s.Sizes()
	if err != nil {
		return "", err
	}
	line := fmt.Sprintf("sqlkv %s table %s, %s: %s (index %s), %d of %d connections in use",
		s.cfg.Dialect, s.cfg.Table, s.cfg.Isolation, mib(t), mib(i), s.pool.Stat().AcquiredConns(), s.pool.Stat().MaxConns())
	if s.cfg.Dialect != Postgres {
		return line, nil
	}
	if err := s.enter(); err != nil {
		return "", err
	}
	defer s.exit()
	var live, dead, vacuums int64
	var last string
	if err := s.pool.QueryRow(context.Background(), s.q.status).Scan(&live, &dead, &last, &vacuums); err != nil {
		return "", fmt.Errorf("sqlkv: status of %s: %w", s.cfg.Table, err)
	}
	return fmt.Sprintf("%s; rows %d live, %d dead; %d vacuums, last %s", line, live, dead, vacuums, last), nil
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
