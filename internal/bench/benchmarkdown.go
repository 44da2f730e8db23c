package bench

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"board/internal/app"
	"board/internal/article"
	"board/internal/markdown"
)

// markdownTarget is what a render of a post of article.MaxContentChars may take (issue: writing).
const markdownTarget = 200 * time.Microsecond

func benchMarkdown(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := app.NewFlagSet("bench markdown", `Usage: board bench markdown [flags]

Times what every create and update of an article or comment does once with its content: render the Markdown to
sanitized HTML and plain text (internal/markdown), on a realistic post of --chars characters (headings, lists, a
table, a code block, links, Korean and English text). Beside it, in the same run: the floor, html.EscapeString of the
same text (what showing it as plain text costs), and the sanitizer alone on the rendered HTML. Each case runs on
one goroutine locked to its thread for --duration after --warmup. Prints, per call, the wall time and the CPU time
of that thread (on a machine shared with other work, the wall time also counts the waits for a core),
and the render's against its target.`, stderr)
	chars := fs.Int("chars", article.MaxContentChars, "characters of the post")
	duration := fs.Duration("duration", 3*time.Second, "timed length of each case")
	warmup := fs.Duration("warmup", 500*time.Millisecond, "untimed run of each case before its timed one")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *chars < 1 || *duration <= 0 || *warmup < 0 {
		return errors.New("need --chars >= 1, --duration > 0, --warmup >= 0")
	}
	post := markdownPost(*chars)
	rendered := markdown.Render(post)
	fmt.Fprintf(stdout, "a post of %d characters (%d bytes) renders to %d bytes of HTML and %d of plain text\n",
		utf8.RuneCountInString(post), len(post), len(rendered.HTML), len(rendered.Text))
	fmt.Fprintf(stdout, "one goroutine per case; %v untimed, then %v timed\n\n", *warmup, *duration)

	var sink int // keeps the compiler from dropping the work
	cases := []struct {
		name string
		run  func()
	}{
		{"floor: html.EscapeString", func() { sink += len(html.EscapeString(post)) }},
		{"sanitize the HTML only", func() { sink += len(markdown.Sanitize(rendered.HTML)) }},
		{"render (markdown.Render)", func() { r := markdown.Render(post); sink += len(r.HTML) + len(r.Text) }},
	}
	wall := make([]time.Duration, len(cases))
	cpu := make([]time.Duration, len(cases))
	hasCPU := true
	for i, c := range cases {
		timeLoop(ctx, *warmup, c.run)
		t := timeLoop(ctx, *duration, c.run)
		if err := ctx.Err(); err != nil {
			return err
		}
		wall[i], cpu[i] = t.wall/time.Duration(t.calls), t.cpu/time.Duration(t.calls)
		hasCPU = hasCPU && t.hasCPU
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\twall µs per call\tvs floor\tCPU µs per call\tvs floor\t")
	for i, c := range cases {
		cpuColumns := "n/a\tn/a"
		if hasCPU {
			cpuColumns = fmt.Sprintf("%.1f\t%.1f×", micros(cpu[i]), float64(cpu[i])/float64(cpu[0]))
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f×\t%s\t\n", c.name, micros(wall[i]), float64(wall[i])/float64(wall[0]), cpuColumns)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nrender, target ≤ %.0f µs: %.1f µs wall (%s)", micros(markdownTarget), micros(wall[2]), verdict(wall[2]))
	if hasCPU {
		fmt.Fprintf(stdout, ", %.1f µs of CPU (%s)", micros(cpu[2]), verdict(cpu[2]))
	}
	fmt.Fprintf(stdout, " [%d]\n", sink%2)
	return nil
}

func verdict(d time.Duration) string {
	if d > markdownTarget {
		return "OVER"
	}
	return "within"
}

// timing is what timeLoop measured: calls in wall time, and the CPU time of the thread that made them.
type timing struct {
	calls     int
	wall, cpu time.Duration
	hasCPU    bool
}

// timeLoop runs f on this goroutine's thread for about d (until ctx ends at the latest).
func timeLoop(ctx context.Context, d time.Duration, f func()) timing {
	runtime.LockOSThread() // the thread's CPU time is the calls'
	defer runtime.UnlockOSThread()
	cpu0, hasCPU := threadCPU()
	start := time.Now()
	n := 0
	for {
		for range 16 { // reading the clock after each call would cost as much as the floor
			f()
		}
		n += 16
		if elapsed := time.Since(start); elapsed >= d || ctx.Err() != nil {
			cpu1, ok := threadCPU()
			return timing{calls: n, wall: elapsed, cpu: cpu1 - cpu0, hasCPU: hasCPU && ok}
		}
	}
}

// threadCPU returns the CPU time the calling OS thread has used (user and system), and whether the system tells it.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// markdownPost is a post as writers write them, of chars characters: a heading, paragraphs with emphasis, links
// and Korean text, lists, a task list, a table, a quote and a code block, repeated as needed.
func markdownPost(chars int) string {
	const section = `## 주간 회의 정리 (Weekly notes)

이번 주에는 **성능 개선**과 *버그 수정*에 집중했습니다. 자세한 내용은 [설계 문서](/articles/1234)와
https://example.com/board/issues 를 참고하세요. ~~지난주 일정~~은 취소되었습니다.

- 로그인 오류 수정 (fixed the sign-in error)
- 페이지 로딩 속도 **2배** 향상
  - 캐시 적용
  - 쿼리 최적화
1. 첫째, 테스트를 실행합니다
2. 둘째, 결과를 확인합니다

- [x] 배포 완료
- [ ] 문서 갱신

| 항목 | 이전 | 이후 |
|:-----|-----:|-----:|
| 첫 페이지 | 120 ms | 45 ms |
| 검색 | 300 ms | 80 ms |

> 좋은 코드는 읽기 쉬운 코드입니다. — a reviewer

` + "```go\nfunc main() {\n\tfmt.Println(\"안녕하세요, board!\")\n}\n```\n\n" + `감사합니다! Questions go to <mailto:team@example.com> or www.example.org.

`
	var b strings.Builder
	for utf8.RuneCountInString(b.String()) < chars {
		b.WriteString(section)
	}
	runes := []rune(b.String())
	return string(runes[:chars])
}
