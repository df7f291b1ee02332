<?php

namespace App\Models;

use Illuminate\Database\Eloquent\Model;

class Post extends Model
{
    // The seed's posts table carries the count and no timestamps.
    public $timestamps = false;

    protected $casts = ['likes_count' => 'integer'];

    public function likes()
    {
        return $this->hasMany(Like::class);
    }
}
