package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/draw"
	"golang.org/x/image/webp"

	"board/internal/fault"
)

// Format is an image format the service takes.
type Format struct {
	Name         string // png, jpeg, gif, webp
	ContentType  string
	Ext          string // of blob keys
	decodeConfig func(io.Reader) (image.Config, error)
	decode       func(io.Reader) (image.Image, error)
	// strip returns the image without its metadata, in b's own array.
	strip func(b []byte) ([]byte, error)
}

var (
	formatPNG  = Format{"png", "image/png", "png", png.DecodeConfig, png.Decode, stripPNG}
	formatJPEG = Format{"jpeg", "image/jpeg", "jpg", jpeg.DecodeConfig, jpeg.Decode, stripJPEG}
	formatGIF  = Format{"gif", "image/gif", "gif", gif.DecodeConfig, gif.Decode, stripGIF}
	formatWebP = Format{"webp", "image/webp", "webp", webp.DecodeConfig, webp.Decode, stripWebP}
	formats    = []Format{formatPNG, formatJPEG, formatGIF, formatWebP}
)

// contentTypeOf returns the content type of a blob key's extension, "" for none of the formats.
func contentTypeOf(ext string) string {
	for _, f := range formats {
		if f.Ext == ext {
			return f.ContentType
		}
	}
	return ""
}

// sniff tells the format from the bytes alone: the name and Content-Type a client sends are not asked.
func sniff(b []byte) (Format, error) {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return formatPNG, nil
	case bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}):
		return formatJPEG, nil
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return formatGIF, nil
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return formatWebP, nil
	}
	return Format{}, &fault.Error{Kind: fault.UnsupportedMediaType, Code: "UNSUPPORTED_MEDIA_TYPE",
		Message: "the file is not a PNG, JPEG, GIF or WebP image"}
}

func invalid(format string, args ...any) error {
	return fault.Invalidf("INVALID_IMAGE", format, args...)
}

var errTruncated = invalid("the image is truncated or malformed")

// be16 reads a big-endian uint16 at b[i:], ok false past the end.
func be16(b []byte, i int) (int, bool) {
	if i+2 > len(b) {
		return 0, false
	}
	return int(binary.BigEndian.Uint16(b[i:])), true
}

// stripJPEG drops the segments that carry metadata: APP1 (Exif with GPS, XMP), APP13 (IPTC), COM, and every other
// APPn but JFIF (APP0), the ICC profile (APP2) and Adobe's colour transform (APP14), which change how pixels look.
// Everything from the first scan on is image data and is kept as is.
func stripJPEG(b []byte) ([]byte, error) {
	out := b[:2]
	for i := 2; ; {
		if i+2 > len(b) || b[i] != 0xFF {
			return nil, errTruncated
		}
		marker := b[i+1]
		switch {
		case marker == 0xFF: // fill byte
			i++
			continue
		case marker == 0x01 || 0xD0 <= marker && marker <= 0xD7: // no length
			out = append(out, b[i:i+2]...)
			i += 2
			continue
		case marker == 0xD9: // end of image before any scan
			return nil, errTruncated
		}
		n, ok := be16(b, i+2)
		if !ok || n < 2 || i+2+n > len(b) {
			return nil, errTruncated
		}
		seg, payload := b[i:i+2+n], b[i+4:i+2+n]
		if marker == 0xDA { // start of scan: the rest is image data
			return append(out, b[i:]...), nil
		}
		keep := true
		switch {
		case marker == 0xE0:
			keep = bytes.HasPrefix(payload, []byte("JFIF\x00"))
		case marker == 0xE2:
			keep = bytes.HasPrefix(payload, []byte("ICC_PROFILE\x00"))
		case marker == 0xEE:
			keep = bytes.HasPrefix(payload, []byte("Adobe"))
		case 0xE1 <= marker && marker <= 0xEF, marker == 0xFE:
			keep = false
		}
		if keep {
			out = append(out, seg...)
		}
		i += 2 + n
	}
}

// stripPNG drops the text chunks (tEXt, zTXt, iTXt), Exif (eXIf) and the time stamp (tIME), and anything after
// IEND.
func stripPNG(b []byte) ([]byte, error) {
	out := b[:8]
	for i := 8; ; {
		if i+12 > len(b) {
			return nil, errTruncated
		}
		n := int(binary.BigEndian.Uint32(b[i:]))
		if n > len(b)-i-12 {
			return nil, errTruncated
		}
		typ := string(b[i+4 : i+8])
		switch typ {
		case "tEXt", "zTXt", "iTXt", "eXIf", "tIME":
		default:
			out = append(out, b[i:i+12+n]...)
		}
		i += 12 + n
		if typ == "IEND" {
			return out, nil
		}
	}
}

// stripWebP drops the EXIF and XMP chunks, clears their flags in the VP8X header, and sets the RIFF size anew.
func stripWebP(b []byte) ([]byte, error) {
	out := b[:12]
	vp8x := -1
	for i := 12; i < len(b); {
		if i+8 > len(b) {
			return nil, errTruncated
		}
		n := int(binary.LittleEndian.Uint32(b[i+4:]))
		if n > len(b)-i-8 {
			return nil, errTruncated
		}
		end := min(i+8+n+n&1, len(b)) // chunks are padded to an even size
		switch typ := string(b[i : i+4]); typ {
		case "EXIF", "XMP ":
		default:
			if typ == "VP8X" && n >= 1 {
				vp8x = len(out) + 8
			}
			out = append(out, b[i:end]...)
		}
		i = end
	}
	if vp8x >= 0 {
		out[vp8x] &^= 0x08 | 0x04 // the EXIF and XMP flags
	}
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out, nil
}

// gifFrames walks a GIF's blocks: it returns the sum of its frames' pixels, and with strip the GIF without its
// comments and application extensions (XMP among them) but for the looping ones. A GIF that ends before its
// trailer is truncated.
func gifFrames(b []byte, strip bool) ([]byte, int64, error) {
	if len(b) < 13 {
		return nil, 0, errTruncated
	}
	i := 13
	if b[10]&0x80 != 0 { // global colour table
		i += 3 << (b[10]&7 + 1)
	}
	out := b[:min(i, len(b))]
	var pixels int64
	// subBlocks returns the index past the data sub-blocks that start at j.
	subBlocks := func(j int) (int, bool) {
		for j < len(b) {
			n := int(b[j])
			j += 1 + n
			if n == 0 {
				return j, j <= len(b)
			}
		}
		return 0, false
	}
	for {
		if i >= len(b) {
			return nil, 0, errTruncated
		}
		start := i
		switch b[i] {
		case 0x3B: // trailer
			return append(out, b[i]), pixels, nil
		case 0x21: // extension
			if i+2 > len(b) {
				return nil, 0, errTruncated
			}
			label := b[i+1]
			end, ok := subBlocks(i + 2)
			if !ok {
				return nil, 0, errTruncated
			}
			keep := label == 0xF9 || label == 0x01 // graphic control, plain text
			if label == 0xFF && i+3 < len(b) && b[i+2] == 11 && i+14 <= len(b) {
				app := string(b[i+3 : i+14])
				keep = app == "NETSCAPE2.0" || app == "ANIMEXTS1.0"
			}
			if keep || !strip {
				out = append(out, b[start:end]...)
			}
			i = end
		case 0x2C: // image descriptor
			if i+10 > len(b) {
				return nil, 0, errTruncated
			}
			w, h := int64(binary.LittleEndian.Uint16(b[i+5:])), int64(binary.LittleEndian.Uint16(b[i+7:]))
			pixels += w * h
			j := i + 10
			if b[i+9]&0x80 != 0 { // local colour table
				j += 3 << (b[i+9]&7 + 1)
			}
			end, ok := subBlocks(j + 1) // past the LZW minimum code size
			if !ok {
				return nil, 0, errTruncated
			}
			out = append(out, b[start:end]...)
			i = end
		default:
			return nil, 0, errTruncated
		}
	}
}

func stripGIF(b []byte) ([]byte, error) {
	out, _, err := gifFrames(b, true)
	return out, err
}

// ThumbnailSize bounds a thumbnail's width and height.
const ThumbnailSize = 320

// thumbnail scales img down to fit ThumbnailSize × ThumbnailSize (an image already that small is kept at its size)
// and encodes it: a JPEG's as JPEG, any other's as PNG, which keeps transparency.
func thumbnail(img image.Image, f Format) ([]byte, Format, error) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w > ThumbnailSize || h > ThumbnailSize {
		if w >= h {
			w, h = ThumbnailSize, max(1, h*ThumbnailSize/w)
		} else {
			w, h = max(1, w*ThumbnailSize/h), ThumbnailSize
		}
	}
	var buf bytes.Buffer
	if f.Name == "jpeg" {
		dst := image.NewRGBA(image.Rect(0, 0, w, h))
		draw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, b, draw.Src, nil)
		err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: 82})
		return buf.Bytes(), formatJPEG, err
	}
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, b, draw.Src, nil)
	err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, dst)
	return buf.Bytes(), formatPNG, err
}

// errNotImage wraps what a decoder says of a file that claims a format and is not a whole image of it.
func errNotImage(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errTruncated
	}
	return invalid("the image cannot be decoded: %v", err)
}
