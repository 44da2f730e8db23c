package mail

import (
	"context"
	"os"
	"path/filepath"

	gomail "github.com/wneessen/go-mail"

	"board/internal/event"
	"board/internal/fault"
)

// Dir is the embedded default Sender: it writes each mail as an RFC 5322 file, <mailId>.eml, in a directory, for
// a board without an SMTP server (development, tests). A file is written whole or not at all (a temporary file
// renamed over it), so a mail sent again replaces its own file: each mail is on disk exactly once.
type Dir struct {
	dir  string
	from sender
}

// NewDir returns the Sender that writes into dir, which it creates.
func NewDir(dir, from string) (*Dir, error) {
	f, err := parseFrom(from)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Dir{dir: dir, from: f}, nil
}

// Send implements Sender. A failed write (a full disk, say) is fault.Unavailable: the mail waits until it can be
// written.
func (d *Dir) Send(_ context.Context, m event.Mail) error {
	msg, err := compose(d.from, m)
	if err != nil {
		return err
	}
	if err := d.write(filepath.Join(d.dir, m.MailID.String()+".eml"), msg); err != nil {
		return fault.Unavailablef(err, "MAIL_DIR_UNAVAILABLE", "cannot write the mail's file")
	}
	return nil
}

// write writes a file whole: into a temporary file, synced, then renamed over target, and the directory synced.
func (d *Dir) write(target string, msg *gomail.Msg) (err error) {
	f, err := os.CreateTemp(d.dir, ".tmp-*.eml")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := msg.WriteTo(f); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), target); err != nil {
		return err
	}
	dir, err := os.Open(d.dir)
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
