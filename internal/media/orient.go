package media

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/draw"
	"image/jpeg"
)

// Exif orientation. A camera stores the sensor's pixels and says in its Exif how to turn them (tag 0x0112); the
// Exif goes with the rest of the metadata, so a photo that says it is turned is turned here, and encoded again.

// jpegOrientation returns the Exif orientation of a JPEG (1 to 8), 1 when it says none.
func jpegOrientation(b []byte) int {
	for i := 2; i+4 <= len(b) && b[i] == 0xFF; {
		marker := b[i+1]
		n, ok := be16(b, i+2)
		if !ok || marker == 0xDA || i+2+n > len(b) {
			return 1
		}
		if payload := b[i+4 : i+2+n]; marker == 0xE1 && bytes.HasPrefix(payload, []byte("Exif\x00\x00")) {
			return exifOrientation(payload[6:])
		}
		i += 2 + n
	}
	return 1
}

// exifOrientation reads tag 0x0112 of the first IFD of a TIFF structure.
func exifOrientation(tiff []byte) int {
	if len(tiff) < 8 {
		return 1
	}
	var order binary.ByteOrder
	switch string(tiff[:2]) {
	case "II":
		order = binary.LittleEndian
	case "MM":
		order = binary.BigEndian
	default:
		return 1
	}
	ifd := int(order.Uint32(tiff[4:]))
	if ifd < 8 || ifd+2 > len(tiff) {
		return 1
	}
	count := int(order.Uint16(tiff[ifd:]))
	for e := ifd + 2; e+12 <= len(tiff) && count > 0; e, count = e+12, count-1 {
		if order.Uint16(tiff[e:]) == 0x0112 && order.Uint16(tiff[e+2:]) == 3 { // SHORT
			if o := int(order.Uint16(tiff[e+8:])); 1 <= o && o <= 8 {
				return o
			}
			return 1
		}
	}
	return 1
}

// orient turns img as Exif orientation o says, into a new image (5 to 8 swap width and height).
func orient(img image.Image, o int) *image.RGBA {
	b := img.Bounds()
	src := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(src, src.Bounds(), img, b.Min, draw.Src)
	w, h := b.Dx(), b.Dy()
	dw, dh := w, h
	if o >= 5 {
		dw, dh = h, w
	}
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := range h {
		row := src.Pix[y*src.Stride : y*src.Stride+4*w]
		for x := range w {
			var dx, dy int
			switch o {
			case 2:
				dx, dy = w-1-x, y
			case 3:
				dx, dy = w-1-x, h-1-y
			case 4:
				dx, dy = x, h-1-y
			case 5:
				dx, dy = y, x
			case 6:
				dx, dy = h-1-y, x
			case 7:
				dx, dy = h-1-y, w-1-x
			case 8:
				dx, dy = y, w-1-x
			default:
				dx, dy = x, y
			}
			copy(dst.Pix[dy*dst.Stride+4*dx:], row[4*x:4*x+4])
		}
	}
	return dst
}

// encodeJPEG is how a turned photo is stored.
func encodeJPEG(img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
	return buf.Bytes(), err
}
