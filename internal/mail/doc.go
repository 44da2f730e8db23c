// Package mail is the mail service (SPEC §3.14): it consumes MAIL_REQUESTED events from the mail topic and sends
// each one, as it was rendered by the service that wrote it to its outbox, through a Sender.
//
// Two Senders: SMTP, which hands the mail to a server with github.com/wneessen/go-mail, and Dir, the embedded
// default, which writes it as an RFC 5322 .eml file named by its mail id. Both build the same message (compose).
//
// Nothing acknowledged is lost: a Sender answers fault.Unavailable when the mail may go through later (server down,
// a 4xx, a timeout, a full disk), and the consumer then stalls the partition and retries until it does; it answers
// fault.Invalid when the server refused the mail for good (a 5xx), and a malformed payload is event.ErrMalformed:
// both are dead-lettered at once (<prefix>mail.dlt).
//
// Duplicates are bounded, not ruled out: the ids of the mails sent are kept in Redis for a day and a redelivered
// mail among them is skipped, but a crash (or an outage of the server) after the server took a mail and before
// its id is kept sends it once more when the record is delivered again. SMTP cannot close that window: the server
// may have committed the mail when its 250 is lost (RFC 1047). docs/mail.md has the details.
package mail
