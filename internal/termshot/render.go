package termshot

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"

	"github.com/charmbracelet/x/ansi"
	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gomono"
	"golang.org/x/image/font/gofont/gomonobold"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/font/sfnt"
	"golang.org/x/image/math/fixed"
)

// RenderOptions style a rendered screen. The zero value is a dark
// terminal with 16-pixel Go Mono.
type RenderOptions struct {
	// Size is the font size in pixels (default 16).
	Size float64
	// Fg and Bg are the default colours (default light grey on near black).
	Fg, Bg color.Color
	// Pad is the margin around the screen in pixels (default 12).
	Pad int
}

// badges stand in for the emoji the app uses as status icons: Go Mono has
// no emoji, and a box would hide which status it is. Each is drawn as a
// square of the colour a terminal's emoji has.
var badges = map[string]color.RGBA{
	"✅": {0x3f, 0xb9, 0x50, 0xff}, "❌": {0xe5, 0x48, 0x4d, 0xff}, "🚫": {0xe5, 0x48, 0x4d, 0xff},
	"⏳": {0xe8, 0xa9, 0x3b, 0xff}, "✋": {0xf0, 0xb6, 0x6d, 0xff}, "⚙️": {0x9a, 0xa5, 0xb1, 0xff},
	"⚙": {0x9a, 0xa5, 0xb1, 0xff}, "🛑": {0xe5, 0x48, 0x4d, 0xff}, "⏸️": {0x6c, 0x9e, 0xf8, 0xff},
}

// Render draws a screen as an image, cell by cell, in Go Mono (bold where
// the terminal shows bold), with each cell's colours, reverse video and
// faint text. A character the font lacks is drawn as a coloured badge if
// it is one of the app's status emoji, else as an empty box.
func Render(s Snapshot, opt RenderOptions) (*image.RGBA, error) {
	if opt.Size <= 0 {
		opt.Size = 16
	}
	if opt.Fg == nil {
		opt.Fg = color.RGBA{0xd4, 0xd4, 0xd8, 0xff}
	}
	if opt.Bg == nil {
		opt.Bg = color.RGBA{0x18, 0x18, 0x1b, 0xff}
	}
	if opt.Pad == 0 {
		opt.Pad = 12
	}
	reg, regFace, err := loadFace(gomono.TTF, opt.Size)
	if err != nil {
		return nil, err
	}
	_, boldFace, err := loadFace(gomonobold.TTF, opt.Size)
	if err != nil {
		return nil, err
	}
	m := regFace.Metrics()
	adv, ok := regFace.GlyphAdvance('M')
	if !ok {
		return nil, fmt.Errorf("termshot: the font has no 'M'")
	}
	cw, ch, ascent := adv.Ceil(), (m.Ascent+m.Descent).Ceil()+2, m.Ascent.Ceil()+1
	img := image.NewRGBA(image.Rect(0, 0, s.Cols*cw+2*opt.Pad, s.Rows*ch+2*opt.Pad))
	draw.Draw(img, img.Bounds(), image.NewUniform(opt.Bg), image.Point{}, draw.Src)
	var buf sfnt.Buffer
	for y := range s.Rows {
		for x := range s.Cols {
			c := s.At(x, y)
			if c.Width == 0 {
				continue
			}
			fg, bg := colorOr(c.Fg, opt.Fg), colorOr(c.Bg, opt.Bg)
			if c.Reverse {
				fg, bg = bg, fg
			}
			if c.Faint {
				fg = mix(fg, bg, 0.45)
			}
			w := max(c.Width, 1)
			cell := image.Rect(opt.Pad+x*cw, opt.Pad+y*ch, opt.Pad+(x+w)*cw, opt.Pad+(y+1)*ch)
			if c.Bg != nil || c.Reverse {
				draw.Draw(img, cell, image.NewUniform(bg), image.Point{}, draw.Src)
			}
			if c.Text == "" || c.Text == " " {
				continue
			}
			if col, ok := badges[c.Text]; ok {
				b := cell.Inset(max(ch/6, 2))
				b.Max.X = b.Min.X + b.Dy() // square
				draw.Draw(img, b, image.NewUniform(col), image.Point{}, draw.Src)
				continue
			}
			r := []rune(c.Text)[0]
			if gi, err := reg.GlyphIndex(&buf, r); err != nil || gi == 0 {
				box(img, cell.Inset(max(ch/5, 2)), fg)
				continue
			}
			face := regFace
			if c.Bold {
				face = boldFace
			}
			d := font.Drawer{Dst: img, Src: image.NewUniform(fg), Face: face,
				Dot: fixed.P(cell.Min.X, cell.Min.Y+ascent)}
			d.DrawString(string(r))
			if c.Line || c.Link != "" { // a terminal underlines a hyperlink
				draw.Draw(img, image.Rect(cell.Min.X, cell.Max.Y-2, cell.Max.X, cell.Max.Y-1), image.NewUniform(fg), image.Point{}, draw.Src)
			}
		}
	}
	return img, nil
}

func loadFace(ttf []byte, size float64) (*sfnt.Font, font.Face, error) {
	f, err := opentype.Parse(ttf)
	if err != nil {
		return nil, nil, fmt.Errorf("termshot: parse font: %w", err)
	}
	face, err := opentype.NewFace(f, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		return nil, nil, fmt.Errorf("termshot: font face: %w", err)
	}
	return f, face, nil
}

// palette is the first 16 colours as a modern dark terminal theme draws
// them, in place of xterm's (whose pure blue is unreadable on black).
var palette = [16]color.RGBA{
	{0x3f, 0x3f, 0x46, 0xff}, {0xef, 0x44, 0x44, 0xff}, {0x22, 0xc5, 0x5e, 0xff}, {0xea, 0xb3, 0x08, 0xff},
	{0x3b, 0x82, 0xf6, 0xff}, {0xa8, 0x55, 0xf7, 0xff}, {0x06, 0xb6, 0xd4, 0xff}, {0xd4, 0xd4, 0xd8, 0xff},
	{0x71, 0x71, 0x7a, 0xff}, {0xf8, 0x71, 0x71, 0xff}, {0x4a, 0xde, 0x80, 0xff}, {0xfa, 0xcc, 0x15, 0xff},
	{0x60, 0xa5, 0xfa, 0xff}, {0xc0, 0x84, 0xfc, 0xff}, {0x22, 0xd3, 0xee, 0xff}, {0xfa, 0xfa, 0xfa, 0xff},
}

func colorOr(c, def color.Color) color.Color {
	switch c := c.(type) {
	case nil:
		return def
	case ansi.BasicColor:
		if c < 16 {
			return palette[c]
		}
	case ansi.IndexedColor:
		if c < 16 {
			return palette[c]
		}
	}
	return c
}

// mix is a + t·(b − a), per channel.
func mix(a, b color.Color, t float64) color.Color {
	ar, ag, ab, _ := a.RGBA()
	br, bg, bb, _ := b.RGBA()
	f := func(x, y uint32) uint8 { return uint8((float64(x)*(1-t) + float64(y)*t) / 257) }
	return color.RGBA{f(ar, br), f(ag, bg), f(ab, bb), 0xff}
}

// box outlines r: the glyph for a character the font does not have.
func box(img *image.RGBA, r image.Rectangle, c color.Color) {
	u := image.NewUniform(c)
	draw.Draw(img, image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), u, image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), u, image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), u, image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), u, image.Point{}, draw.Src)
}
