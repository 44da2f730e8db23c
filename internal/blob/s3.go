package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config locates a bucket of an S3-compatible store.
type S3Config struct {
	Endpoint  string // URL of the store, http:// or https://
	Region    string // "" is us-east-1
	Bucket    string
	AccessKey string
	SecretKey string
	Prefix    string // put in front of every key, so that deployments may share a bucket
}

// S3 stores objects in a bucket of an S3-compatible store (AWS S3, MinIO, versitygw, Ceph, SeaweedFS, ...). A
// single PUT of a whole object is atomic on S3, and acknowledged only once stored.
type S3 struct {
	client *minio.Client
	bucket string
	prefix string
}

// NewS3 returns the store of cfg's bucket, creating the bucket if it is missing.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("blob s3: endpoint %q is not an http(s) URL", cfg.Endpoint)
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: u.Scheme == "https", Region: cfg.Region, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return nil, fmt.Errorf("blob s3: %w", err)
	}
	exists, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("blob s3: bucket %s: %w", cfg.Bucket, err)
	}
	if !exists {
		err := client.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: cfg.Region})
		if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
			return nil, fmt.Errorf("blob s3: create bucket %s: %w", cfg.Bucket, err)
		}
	}
	return &S3{client: client, bucket: cfg.Bucket, prefix: cfg.Prefix}, nil
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, r, size,
		minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true})
	return err
}

// Open implements Store. The object reads lazily: a Seek costs nothing, the next Read asks for the rest from there.
func (s *S3) Open(ctx context.Context, key string) (Object, error) {
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.notFound(key, err)
	}
	return &s3Object{Object: obj, info: info}, nil
}

type s3Object struct {
	*minio.Object
	info Info
}

func (o *s3Object) Info() Info { return o.info }

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := checkKey(key); err != nil {
		return Info{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	st, err := s.client.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.notFound(key, err)
	}
	return Info{Key: key, Size: st.Size, ModTime: st.LastModified}, nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
	if err != nil && errors.Is(s.notFound(key, err), ErrNotFound) {
		return nil
	}
	return err
}

// List implements Store.
func (s *S3) List(ctx context.Context, fn func(Info) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing's goroutine when fn stops early
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true}) {
		if obj.Err != nil {
			return obj.Err
		}
		key := obj.Key[len(s.prefix):]
		if !KeyOK(key) {
			continue
		}
		if err := fn(Info{Key: key, Size: obj.Size, ModTime: obj.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (s *S3) notFound(key string, err error) error {
	if resp := minio.ToErrorResponse(err); resp.StatusCode == http.StatusNotFound || resp.Code == "NoSuchKey" {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return err
}
