package web

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The style sheet's colours, read as a browser would for the two themes: the top :root block's custom properties,
// and those the dark scheme's media query sets over them.
var (
	rootBlock   = regexp.MustCompile(`(?s)^[^{]*?:root\s*\{([^}]*)\}`)
	darkBlock   = regexp.MustCompile(`(?s)@media \(prefers-color-scheme: dark\)\s*\{\s*:root\s*\{([^}]*)\}`)
	declaration = regexp.MustCompile(`([-a-z]+)\s*:\s*([^;]+?)\s*(?:;|$)`)
	varRef      = regexp.MustCompile(`^var\((--[-a-z]+)\)$`)
)

func declarations(block string) map[string]string {
	out := map[string]string{}
	for _, m := range declaration.FindAllStringSubmatch(block, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// rule is the declarations of the rule whose selector list is exactly selector.
func rule(t *testing.T, css, selector string) map[string]string {
	t.Helper()
	m := regexp.MustCompile(`(?s)(?:^|\})\s*` + regexp.QuoteMeta(selector) + `\s*\{([^}]*)\}`).FindStringSubmatch(css)
	if m == nil {
		t.Fatalf("style.css has no rule %q", selector)
	}
	return declarations(m[1])
}

// colour resolves a declared value (#rrggbb, #rgb or var(--x)) in a theme to its sRGB channels.
func colour(t *testing.T, theme map[string]string, value string) [3]float64 {
	t.Helper()
	for i := 0; i < 4; i++ {
		m := varRef.FindStringSubmatch(value)
		if m == nil {
			break
		}
		value = theme[m[1]]
	}
	hex := strings.TrimPrefix(value, "#")
	if len(hex) == 3 {
		hex = string([]byte{hex[0], hex[0], hex[1], hex[1], hex[2], hex[2]})
	}
	n, err := strconv.ParseUint(hex, 16, 32)
	if len(hex) != 6 || err != nil {
		t.Fatalf("%q is not a colour this test reads", value)
	}
	return [3]float64{float64(n >> 16 & 0xff), float64(n >> 8 & 0xff), float64(n & 0xff)}
}

// luminance is WCAG 2's relative luminance of an sRGB colour.
func luminance(c [3]float64) float64 {
	var l [3]float64
	for i, v := range c {
		v /= 255
		if v <= 0.04045 {
			l[i] = v / 12.92
		} else {
			l[i] = math.Pow((v+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*l[0] + 0.7152*l[1] + 0.0722*l[2]
}

// contrast is WCAG 2's contrast ratio of two colours, from 1 to 21.
func contrast(a, b [3]float64) float64 {
	la, lb := luminance(a), luminance(b)
	return (math.Max(la, lb) + 0.05) / (math.Min(la, lb) + 0.05)
}

func TestContrastRatio(t *testing.T) {
	t.Parallel()
	white, black := [3]float64{255, 255, 255}, [3]float64{0, 0, 0}
	if got := contrast(white, black); math.Abs(got-21) > 1e-9 {
		t.Errorf("white on black: %.2f, want 21", got)
	}
	if got := contrast([3]float64{0x76, 0x76, 0x76}, white); math.Abs(got-4.54) > 0.01 {
		t.Errorf("#767676 on white: %.2f, want 4.54", got)
	}
}

// TestUnreadBadgeContrast: the unread count is small bold text on its own background, which must stand out from
// it by WCAG's 4.5:1 in the light theme and in the dark one.
func TestUnreadBadgeContrast(t *testing.T) {
	t.Parallel()
	css := string(assets["style.css"].body)
	light := declarations(rootBlock.FindStringSubmatch(css)[1])
	dark := map[string]string{}
	for k, v := range light {
		dark[k] = v
	}
	m := darkBlock.FindStringSubmatch(css)
	if m == nil {
		t.Fatal("style.css has no dark theme")
	}
	for k, v := range declarations(m[1]) {
		dark[k] = v
	}
	badge := rule(t, css, ".bell-count")
	for name, theme := range map[string]map[string]string{"light": light, "dark": dark} {
		ratio := contrast(colour(t, theme, badge["color"]), colour(t, theme, badge["background"]))
		if ratio < 4.5 {
			t.Errorf("%s theme: the unread badge's %s on %s is %.2f:1, under 4.5:1", name, badge["color"], badge["background"], ratio)
		}
	}
}
